//! Which releases a problem affects: a package, the versions affected (a PEP 440
//! range, as pip writes them) and the release that fixes it.

use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};

/// The packages a range may name, as a paste's versions are named (see
/// `diagnose::parse`). Matching a name is case-insensitive.
pub const PACKAGES: [&str; 9] = [
    "torch",
    "NCCL",
    "CUDA",
    "driver",
    "Python",
    "DeepSpeed",
    "Accelerate",
    "transformers",
    "Lightning",
];

/// The package named `name` (any case; `pytorch` is `torch`), as `PACKAGES` spells it.
pub fn package_named(name: &str) -> Option<&'static str> {
    let name = name.trim();
    if name.eq_ignore_ascii_case("pytorch") {
        return Some("torch");
    }
    PACKAGES
        .iter()
        .find(|p| p.eq_ignore_ascii_case(name))
        .copied()
}

/// Releases of one package a problem affects.
#[derive(Debug, Clone)]
pub struct Affected {
    /// As `PACKAGES` spells it.
    pub package: &'static str,
    /// The range as written (`>=2.19.0, <2.19.4`).
    pub range: String,
    specifiers: VersionSpecifiers,
    /// The first release without the problem, if one exists.
    pub fixed: Option<String>,
}

impl Affected {
    /// Reads a range as an entry writes it; the error says what is wrong.
    pub fn new(package: &str, range: &str, fixed: Option<&str>) -> Result<Affected, String> {
        let package = package_named(package).ok_or_else(|| {
            format!(
                "unknown package `{package}`; one of: {}",
                PACKAGES.join(", ")
            )
        })?;
        if range.trim().is_empty() {
            return Err("`affected` must give a range, such as '>=2.19.0, <2.19.4'".into());
        }
        let specifiers = VersionSpecifiers::from_str(range)
            .map_err(|e| format!("`affected` range `{range}` does not parse: {e}"))?;
        let fixed = match fixed {
            None => None,
            Some(f) => {
                let version = Version::from_str(f.trim())
                    .map_err(|e| format!("`fixed` version `{f}` does not parse: {e}"))?;
                if specifiers.contains(&version) {
                    return Err(format!(
                        "`fixed` version {f} lies inside the affected range `{range}`"
                    ));
                }
                Some(f.trim().to_string())
            }
        };
        Ok(Affected {
            package,
            range: range.trim().to_string(),
            specifiers,
            fixed,
        })
    }

    /// Whether `version` (as a paste shows it) of `package` is affected; `None` when
    /// the package is another one or the version does not read as a release.
    pub fn affects(&self, package: &str, version: &str) -> Option<bool> {
        if !self.package.eq_ignore_ascii_case(package) {
            return None;
        }
        let version = Version::from_str(version.trim()).ok()?;
        Some(self.specifiers.contains(&version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_hold_the_versions_they_name() {
        let a = Affected::new("nccl", ">=2.19.0, <2.19.4", Some("2.19.4")).unwrap();
        assert_eq!(a.package, "NCCL");
        assert_eq!(a.affects("NCCL", "2.19.3"), Some(true));
        assert_eq!(a.affects("NCCL", "2.19.4"), Some(false));
        assert_eq!(a.affects("NCCL", "2.18.6"), Some(false));
        assert_eq!(a.affects("torch", "2.19.3"), None);
        assert_eq!(a.affects("NCCL", "not a version"), None);
        let driver = Affected::new("driver", "<535.104.05", None).unwrap();
        assert_eq!(driver.affects("driver", "535.86.10"), Some(true));
        let cuda = Affected::new("CUDA", "==12.1.*", None).unwrap();
        assert_eq!(cuda.affects("CUDA", "12.1"), Some(true));
        assert_eq!(cuda.affects("CUDA", "12.2"), Some(false));
    }

    #[test]
    fn bad_ranges_say_what_is_wrong() {
        assert!(
            Affected::new("tensorflow", ">=2", None)
                .unwrap_err()
                .contains("unknown package")
        );
        assert!(
            Affected::new("torch", "two point one", None)
                .unwrap_err()
                .contains("does not parse")
        );
        assert!(
            Affected::new("torch", "", None)
                .unwrap_err()
                .contains("must give a range")
        );
        assert!(
            Affected::new("torch", ">=2.1, <2.2", Some("2.1.5"))
                .unwrap_err()
                .contains("inside")
        );
        assert!(
            Affected::new("torch", ">=2.1, <2.2", Some("x"))
                .unwrap_err()
                .contains("`fixed`")
        );
    }
}

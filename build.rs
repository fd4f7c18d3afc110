//! The shipped entries under `kb/` are compiled into the binary (`src/kb/builtin.rs`):
//! an entry added, edited or removed there rebuilds it.
fn main() {
    println!("cargo:rerun-if-changed=kb");
}

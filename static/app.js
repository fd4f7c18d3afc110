// errbook portal: small conveniences on top of pages that work without JavaScript.
// - Ctrl/Cmd+Enter in the paste box submits it.
// - "/" focuses the search box.
// - A traceback pasted into a search box goes to the diagnosis instead.
// - Copy buttons on code blocks and share links.
// - The answer page's address becomes its share link, so the address bar can be shared.
"use strict";

(function () {
  const root = document.documentElement;
  const label = (name, fallback) => root.dataset[name] || fallback;

  // --- Paste box ----------------------------------------------------------------------
  const pasteForm = document.getElementById("paste-form");
  const pasteText = document.getElementById("paste-text");
  if (pasteForm && pasteText) {
    pasteText.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        if (pasteText.value.trim() !== "") {
          pasteForm.requestSubmit ? pasteForm.requestSubmit() : pasteForm.submit();
        }
      }
    });
    // On a desktop the paste box is where people start; on a phone the keyboard would
    // cover the page, so leave focus alone there.
    if (!window.matchMedia("(pointer: coarse)").matches && !location.hash) {
      pasteText.focus({ preventScroll: true });
    }
  }
  for (const hint of document.querySelectorAll(".js-only")) {
    hint.hidden = false;
  }

  // --- "/" to search ------------------------------------------------------------------
  document.addEventListener("keydown", (event) => {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target.closest && target.closest("input, textarea, select, [contenteditable]")) return;
    const search = document.getElementById("site-q");
    if (search) {
      event.preventDefault();
      search.focus();
      search.select();
    }
  });

  // --- A traceback pasted into a search box -------------------------------------------
  // A one-line box drops the line breaks a diagnosis needs, so the paste is posted
  // to the answer page whole.
  const looksLikeTraceback = (text) => {
    const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
    if (/Traceback \(most recent call last\)/.test(text)) return true;
    if (/File "[^"]*", line \d+/.test(text)) return true;
    return lines.length >= 3 && /error|exception|failed|fatal|nccl|cuda|killed|signal|timeout/i.test(text);
  };
  const diagnose = (text) => {
    const form = document.createElement("form");
    form.method = "post";
    form.action = "/diagnose";
    form.hidden = true;
    const field = document.createElement("textarea");
    field.name = "text";
    field.value = text;
    form.append(field);
    document.body.append(form);
    form.submit();
  };
  for (const box of document.querySelectorAll('input[type="search"][name="q"]')) {
    box.addEventListener("paste", (event) => {
      const text = event.clipboardData ? event.clipboardData.getData("text") : "";
      if (text && looksLikeTraceback(text)) {
        event.preventDefault();
        diagnose(text);
      }
    });
  }

  // --- Copy buttons -------------------------------------------------------------------
  const copyText = async (text) => {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return;
    }
    // Plain-HTTP intranet servers are not a secure context: the old way still works.
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    if (!ok) throw new Error("copy refused");
  };
  const copyButton = (getText, describedBy) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.textContent = label("copy", "Copy");
    if (describedBy) button.setAttribute("aria-describedby", describedBy);
    const status = document.createElement("span");
    status.className = "visually-hidden";
    status.setAttribute("role", "status");
    button.addEventListener("click", async () => {
      let message;
      try {
        await copyText(getText());
        message = label("copied", "Copied");
      } catch (_) {
        message = label("copyFailed", "Select and copy by hand");
      }
      button.textContent = message;
      status.textContent = message;
      setTimeout(() => {
        button.textContent = label("copy", "Copy");
        status.textContent = "";
      }, 2000);
    });
    return [button, status];
  };
  for (const pre of document.querySelectorAll("main pre")) {
    const wrap = document.createElement("div");
    wrap.className = "code-block";
    pre.replaceWith(wrap);
    wrap.append(pre, ...copyButton(() => pre.innerText));
  }
  for (const link of document.querySelectorAll("a.share-link")) {
    const absolute = () => new URL(link.getAttribute("href"), location.href).href;
    // Without a configured public URL the server only knows the path; the browser
    // knows the whole address to paste into a chat.
    if (link.textContent.startsWith("/")) link.textContent = absolute();
    link.after(...copyButton(absolute));
  }

  // --- The answer page's address is its share link ------------------------------------
  const share = document.getElementById("share-link");
  if (share && share.dataset.path && history.replaceState) {
    const url = new URL(share.dataset.path, location.href);
    if (url.pathname + url.search !== location.pathname + location.search) {
      history.replaceState(null, "", url);
    }
  }
})();

async () => {
  // open every collapsed part, so the tables inside details are laid out too; scroll-state
  // container queries settle after a frame
  for (const d of document.querySelectorAll("details")) d.open = true;
  for (let k = 0; k < 3; k++) await new Promise((done) => requestAnimationFrame(done));
  const problems = [];
  const vw = document.documentElement.clientWidth;
  const describe = (el) => {
    const cap = el.querySelector("caption, figcaption");
    return (el.tagName + " " + (cap ? cap.textContent : el.textContent)).slice(0, 90);
  };
  // 1. a scroll box that scrolls must say so (the cue appears once it can scroll)
  for (const w of document.querySelectorAll(".table-wrap")) {
    if (w.scrollWidth > w.clientWidth + 1) {
      const cue = w.querySelector(":scope > .scroll-cue");
      const shown = cue && cue.getBoundingClientRect().height > 0 && getComputedStyle(cue).visibility !== "hidden";
      if (!shown) problems.push("scrolls without a cue: " + describe(w));
    }
    const cap = w.querySelector("caption");
    if (cap) {  // a caption is read whole: it stays inside the visible box
      const c = cap.getBoundingClientRect(), b = w.getBoundingClientRect();
      if (c.right > b.right + 1 || c.left < b.left - 1) problems.push("caption cut: " + describe(w));
    }
  }
  // 2. nothing else runs past the page's right edge
  for (const el of document.querySelectorAll("figure, img, pre, p, li, h1, h2, .callout, table.kv, nav")) {
    if (el.closest(".table-wrap")) continue;
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > vw + 1) problems.push("overflows the page: " + describe(el));
  }
  // 3. no two pieces of text overlap (each text node's line boxes)
  const boxes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.textContent.trim()) continue;
    const host = n.parentElement;
    if (host.closest("script, style")) continue;
    const clip = host.closest(".table-wrap");
    range.selectNodeContents(n);
    for (const r of range.getClientRects()) {
      if (r.width < 1 || r.height < 1) continue;
      boxes.push({r, n, clip, text: n.textContent.trim().slice(0, 40)});
    }
  }
  boxes.sort((a, b) => a.r.top - b.r.top);
  for (let i = 0; i < boxes.length; i++) {
    const a = boxes[i];
    for (let j = i + 1; j < boxes.length && boxes[j].r.top < a.r.bottom - 2; j++) {
      const b = boxes[j];
      if (a.n === b.n) continue;
      const dx = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
      const dy = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
      if (dx > 2 && dy > 2) problems.push(`texts overlap: "${a.text}" and "${b.text}"`);
    }
  }
  return problems;
}

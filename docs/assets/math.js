// Typesets the equations of the site with the KaTeX shipped beside it (assets/vendor/katex):
// no network, so the pages read the same served or opened from disk (file://).
// pymdownx.arithmatex (generic) leaves each equation as \( ... \) in a span.arithmatex, or
// \[ ... \] in a div.arithmatex; KaTeX replaces it. An equation KaTeX cannot parse is shown
// in red as its source (a .katex-error), which the site's browser test looks for.
document$.subscribe(({ body }) => {
  for (const el of body.querySelectorAll(".arithmatex")) {
    const tex = el.textContent.trim();
    katex.render(tex.slice(2, -2), el, { displayMode: tex.startsWith("\\["), throwOnError: false });
  }
});

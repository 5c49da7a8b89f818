// Search snippets, readable: Sphinx builds each result's snippet from the page's HTML, where a
// formula is still its LaTeX source ("\(-\ln p\)": MathJax typesets it only on the page itself).
// This wraps Search.htmlToText (searchtools.js, loaded before this deferred script on search.html)
// so that the snippet, and the keyword window Sphinx cuts from it, are plain text: "-ln p".
"use strict";

const LMCORE_SYMBOLS = {
  ln: "ln", log: "log", exp: "exp", max: "max", min: "min", arg: "arg", argmax: "argmax",
  sum: " Σ", prod: " Π", cdot: "·", times: "×", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠",
  neq: "≠", approx: "≈", to: "→", rightarrow: "→", leftarrow: "←", infty: "∞", partial: "∂",
  nabla: "∇", in: "∈", mid: "|", lvert: "|", rvert: "|", vert: "|", lVert: "‖", rVert: "‖",
  ldots: "…", cdots: "⋯", dots: "…", pm: "±", top: "ᵀ", alpha: "α", beta: "β", gamma: "γ",
  delta: "δ", epsilon: "ε", varepsilon: "ε", eta: "η", theta: "θ", lambda: "λ", mu: "μ",
  pi: "π", sigma: "σ", tau: "τ", phi: "φ", psi: "ψ", omega: "ω", Delta: "Δ", Sigma: "Σ",
  ell: "ℓ", sim: "~", gg: "≫", ll: "≪", quad: " ", qquad: " ", left: "", right: "", big: "", Big: "", displaystyle: "",
};

function lmcorePlainFormula(latex) {
  let t = latex;
  for (let i = 0; i < 8; i++) {  // innermost first: \frac{a}{\frac{b}{c}}
    const before = t;
    t = t.replace(/\\underbrace\s*\{([^{}]*)\}(?!\s*_\{[^{}]*\{)(?:\s*_(?:\{[^{}]*\}|\w+))?/g, "$1")
         .replace(/\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)")
         .replace(/\\sqrt\s*\{([^{}]*)\}/g, "√($1)")
         .replace(/\\(?:text|mathrm|mathbf|mathit|mathcal|mathbb|operatorname|boldsymbol|hat|bar|tilde|overline)\s*\{([^{}]*)\}/g, "$1")
         .replace(/([_^])\{([^{}]*)\}/g, "$1$2");
    if (t === before) break;
  }
  t = t.replace(/\\([A-Za-z]+)/g, (m, name) => (name in LMCORE_SYMBOLS ? LMCORE_SYMBOLS[name] : name))
       .replace(/\\[,;:! ]/g, " ")
       .replace(/[{}]/g, "")
       .replace(/\((\w+)\)\/\((\w+)\)/g, "$1/$2");
  return t.replace(/\s+/g, " ").trim();
}

// Only what MathJax would typeset, \(...\) and \[...\]: code keeps its backslashes ("\n").
function lmcorePlainMath(text) {
  return text.replace(/\\\(([\s\S]*?)\\\)|\\\[([\s\S]*?)\\\]/g,
                      (m, inline, display) => lmcorePlainFormula(inline !== undefined ? inline : display));
}

if (typeof Search !== "undefined" && typeof Search.htmlToText === "function") {
  const lmcoreToText = Search.htmlToText;
  Search.htmlToText = (html, anchor) => lmcorePlainMath(lmcoreToText(html, anchor));
}

// A task page: a click on a thumbnail shows the full-size image over the page; a click or Escape closes it.
(function () {
  "use strict";
  var overlay = null;
  function close() { if (overlay) { overlay.remove(); overlay = null; } }
  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a.zoom") : null;
    if (overlay && !link) { close(); return; }
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey) { return; }
    event.preventDefault();
    close();
    overlay = document.createElement("div");
    overlay.className = "lightbox";
    var image = document.createElement("img");
    image.src = link.getAttribute("href");
    image.alt = link.querySelector("img") ? link.querySelector("img").alt : "";
    var open = document.createElement("a");
    open.href = link.getAttribute("href");
    open.textContent = "open the file";
    overlay.appendChild(image);
    overlay.appendChild(open);
    document.body.appendChild(overlay);
  });
  document.addEventListener("keydown", function (event) { if (event.key === "Escape") { close(); } });
}());

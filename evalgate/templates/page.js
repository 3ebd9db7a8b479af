(function () {
  "use strict";
  function compare(a, b) {
    var x = Number(a), y = Number(b);
    if (a !== "" && b !== "" && !isNaN(x) && !isNaN(y)) { return x - y; }
    return String(a).localeCompare(String(b), undefined, {numeric: true});
  }
  function key(cell) {
    var value = cell.getAttribute("data-sort");
    return value === null ? cell.textContent.trim() : value;
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var heads = table.querySelectorAll("th");
    Array.prototype.forEach.call(heads, function (th, column) {
      th.addEventListener("click", function () {
        var up = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
        var rows = Array.prototype.slice.call(table.tBodies);
        rows.sort(function (a, b) {
          return compare(key(a.rows[0].cells[column]), key(b.rows[0].cells[column])) *
            (up ? 1 : -1);
        });
        rows.forEach(function (row) { table.appendChild(row); });
      });
    });
  });
  var group = document.getElementById("group-by"), order = document.getElementById("order-by");
  if (!group || !order) { return; }
  function regroup() {
    var by = group.value, sort = order.value, title = group.options[group.selectedIndex].text;
    Array.prototype.forEach.call(document.querySelectorAll(".chart .rows"), function (list) {
      Array.prototype.forEach.call(list.querySelectorAll(".group"), function (g) { g.remove(); });
      var rows = Array.prototype.slice.call(list.querySelectorAll(".row"));
      rows.sort(function (a, b) {
        return (by ? compare(a.dataset[by], b.dataset[by]) : 0) ||
          compare(a.dataset[sort], b.dataset[sort]) || compare(a.dataset.first, b.dataset.first);
      });
      var last = null;
      rows.forEach(function (row) {
        if (by && row.dataset[by] !== last) {
          last = row.dataset[by];
          var members = rows.filter(function (r) { return r.dataset[by] === last; });
          var bad = members.filter(function (r) { return r.dataset.problem === "1"; }).length;
          var head = document.createElement("div");
          head.className = "group";
          head.textContent = title + " " + last + ": " + members.length +
            (members.length === 1 ? " config" : " configs") +
            (bad ? ", " + bad + " with a problem" : "");
          list.appendChild(head);
        }
        list.appendChild(row);
      });
    });
  }
  group.addEventListener("change", regroup);
  order.addEventListener("change", regroup);
}());

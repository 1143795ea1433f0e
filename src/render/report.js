// memmon report: the chart (canvas, no library), its zoom, pan and tooltip, and the self-test
// that tests/report.rs runs in headless Chromium (URL ending in #selftest).
(function () {
  'use strict';

  var DATA = JSON.parse(document.getElementById('memmon-data').textContent);
  var BASE_COLORS = ['#2f6db5', '#1f9e89', '#5b4bb7', '#3a8fd9', '#2c7a3f', '#7a5195'];
  var NEW_COLORS = ['#d9641e', '#c0392b', '#e0a100', '#b5466b', '#8c5a2b', '#e8743b'];
  var ANY_COLORS = ['#2f6db5', '#d9641e', '#1f9e89', '#c0392b', '#5b4bb7', '#e0a100', '#2c7a3f', '#b5466b', '#3a8fd9', '#8c5a2b'];
  var PAD = { left: 78, right: 18, top: 16, bottom: 42 };

  var canvas = document.getElementById('chart');
  var wrap = document.getElementById('chart-wrap');
  var tooltip = document.getElementById('tooltip');
  var ctx = canvas.getContext('2d');

  var series = DATA.series.map(function (s, i) {
    var palette, k;
    if (s.role === 'base') { palette = BASE_COLORS; k = countRole('base', i); }
    else if (s.role === 'new') { palette = NEW_COLORS; k = countRole('new', i); }
    else { palette = ANY_COLORS; k = i; }
    return { data: s, color: palette[k % palette.length], visible: true, dashed: s.role === 'new' };
  });

  // The indices where a series' line restarts (a new session), as a lookup.
  function breakSet(breaks) {
    var set = {};
    (breaks || []).forEach(function (i) { set[i] = true; });
    return set;
  }

  function countRole(role, upto) {
    var n = 0;
    for (var j = 0; j < upto; j++) if (DATA.series[j].role === role) n++;
    return n;
  }

  var full = { x0: 0, x1: 0 };
  series.forEach(function (s) {
    var t = s.data.t;
    if (t.length) full.x1 = Math.max(full.x1, t[t.length - 1]);
  });
  if (full.x1 <= full.x0) full.x1 = full.x0 + 1;
  var view = { x0: full.x0, x1: full.x1 };
  var hover = null; // {px, py} in CSS pixels
  var drag = null;  // {startPx, x0, x1, select}
  var layout = null;

  // ---- units ----
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  function fmtBytes(b) {
    if (b < 1024) return Math.round(b) + ' B';
    var v = b, u = 0;
    while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    return (v >= 100 ? v.toFixed(1) : v.toFixed(2)) + ' ' + UNITS[u];
  }
  function fmtTime(s) {
    if (s === 0) return '0 s';
    if (s < 0) return '-' + fmtTime(-s);
    if (s < 1) return (s * 1000).toFixed(0) + ' ms';
    if (s < 60) return s.toFixed(2) + ' s';
    var t = Math.round(s);
    if (t < 3600) return Math.floor(t / 60) + ' min ' + String(t % 60).padStart(2, '0') + ' s';
    return Math.floor(t / 3600) + ' h ' + String(Math.floor((t % 3600) / 60)).padStart(2, '0') + ' min';
  }
  // Tick step: 1, 2 or 5 times a power of ten, about `count` ticks over `span`.
  function niceStep(span, count) {
    var raw = span / Math.max(1, count);
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  // A time step a person would pick: 1-2-5 in seconds, then minutes and hours.
  var TIME_STEPS = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 432000, 864000];
  function timeStep(span, count) {
    var raw = span / Math.max(1, count);
    if (raw <= 30) return niceStep(span, count);
    for (var i = 0; i < TIME_STEPS.length; i++) if (TIME_STEPS[i] >= raw) return TIME_STEPS[i];
    return niceStep(span / 86400, count) * 86400;
  }
  function tickLabelTime(t, step) {
    if (step >= 3600 && step % 3600 === 0) return Math.round(t / 3600) + ' h';
    if (step >= 60 && step % 60 === 0) {
      var m = Math.round(t / 60);
      if (m >= 60) return Math.floor(m / 60) + ' h ' + String(m % 60).padStart(2, '0') + ' min';
      return m + ' min';
    }
    var digits = step >= 1 ? 0 : Math.min(3, Math.ceil(-Math.log10(step) - 1e-9));
    return t.toFixed(digits) + ' s';
  }

  // ---- geometry ----
  function resize() {
    var dpr = window.devicePixelRatio || 1;
    var w = wrap.clientWidth || 800, h = wrap.clientHeight || 440;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    layout = { w: w, h: h, pw: w - PAD.left - PAD.right, ph: h - PAD.top - PAD.bottom };
  }
  function xToPx(t) { return PAD.left + (t - view.x0) / (view.x1 - view.x0) * layout.pw; }
  function pxToX(px) { return view.x0 + (px - PAD.left) / layout.pw * (view.x1 - view.x0); }

  // First index with t[i] >= x.
  function lowerBound(t, x) {
    var lo = 0, hi = t.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (t[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
  }
  function visibleRange(t) {
    var a = Math.max(0, lowerBound(t, view.x0) - 1);
    var b = Math.min(t.length, lowerBound(t, view.x1) + 1);
    return [a, b];
  }

  function yScale() {
    var max = 0;
    series.forEach(function (s) {
      if (!s.visible) return;
      var r = visibleRange(s.data.t), v = s.data.v;
      for (var i = r[0]; i < r[1]; i++) if (v[i] > max) max = v[i];
    });
    if (max <= 0) max = 1024;
    // Ticks in the unit of the largest value.
    var u = 0, unit = 1;
    while (max / unit >= 1024 && u < UNITS.length - 1) { unit *= 1024; u++; }
    var step = niceStep(max / unit * 1.05, 5) * unit;
    var top = Math.ceil(max * 1.05 / step) * step;
    return { top: top, step: step, unit: unit, unitName: UNITS[u] };
  }

  // ---- drawing ----
  var drawnSeries = 0;
  function draw() {
    if (!layout) resize();
    var y = yScale();
    var yToPx = function (v) { return PAD.top + layout.ph * (1 - v / y.top); };
    ctx.clearRect(0, 0, layout.w, layout.h);
    ctx.font = '12px system-ui, sans-serif';

    // Grid and y labels.
    ctx.strokeStyle = '#e6e9ef';
    ctx.fillStyle = '#5b6577';
    ctx.lineWidth = 1;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (var v = 0; v <= y.top + y.step / 2; v += y.step) {
      var py = Math.round(yToPx(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(PAD.left, py); ctx.lineTo(PAD.left + layout.pw, py); ctx.stroke();
      var val = v / y.unit;
      var digits = y.step / y.unit >= 1 ? 0 : 1;
      ctx.fillText(val.toFixed(digits) + ' ' + y.unitName, PAD.left - 6, py);
    }
    // X ticks.
    var xs = timeStep(view.x1 - view.x0, Math.max(2, Math.floor(layout.pw / 110)));
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    for (var t = Math.ceil(view.x0 / xs) * xs; t <= view.x1 + 1e-9; t += xs) {
      var px = Math.round(xToPx(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(px, PAD.top); ctx.lineTo(px, PAD.top + layout.ph); ctx.stroke();
      ctx.fillText(tickLabelTime(t, xs), px, PAD.top + layout.ph + 6);
    }
    ctx.fillText('time since the recording started', PAD.left + layout.pw / 2, PAD.top + layout.ph + 24);
    ctx.strokeStyle = '#9aa3b2';
    ctx.strokeRect(PAD.left + 0.5, PAD.top + 0.5, layout.pw, layout.ph);

    // Series, clipped to the plot area.
    ctx.save();
    ctx.beginPath(); ctx.rect(PAD.left, PAD.top, layout.pw, layout.ph); ctx.clip();
    drawnSeries = 0;
    series.forEach(function (s) {
      if (!s.visible || !s.data.t.length) return;
      var tt = s.data.t, vv = s.data.v, r = visibleRange(tt), cut = breakSet(s.data.breaks);
      ctx.strokeStyle = s.color;
      ctx.lineWidth = 1.6;
      ctx.setLineDash(s.dashed ? [6, 3] : []);
      ctx.beginPath();
      for (var i = r[0]; i < r[1]; i++) {
        var x = xToPx(tt[i]), yy = yToPx(vv[i]);
        // A later session of an appended recording starts apart: the time between is a gap.
        if (i === r[0] || cut[i]) ctx.moveTo(x, yy); else ctx.lineTo(x, yy);
      }
      if (r[1] - r[0] === 1) ctx.arc(xToPx(tt[r[0]]), yToPx(vv[r[0]]), 2, 0, 2 * Math.PI);
      ctx.stroke();
      ctx.setLineDash([]);
      // Events: a thin vertical line with its label.
      ctx.fillStyle = s.color;
      ctx.textAlign = 'left';
      ctx.textBaseline = 'top';
      s.data.events.forEach(function (e, k) {
        if (e[0] < view.x0 || e[0] > view.x1) return;
        var ex = Math.round(xToPx(e[0])) + 0.5;
        ctx.globalAlpha = 0.45;
        ctx.beginPath(); ctx.moveTo(ex, PAD.top); ctx.lineTo(ex, PAD.top + layout.ph); ctx.stroke();
        ctx.globalAlpha = 1;
        ctx.fillText(e[1], ex + 3, PAD.top + 3 + (k % 4) * 13);
      });
      // A bench window's runs in flight: steps in the bottom fifth of the chart.
      var fl = s.data.in_flight;
      if (fl && fl.length) {
        var most = 0;
        fl.forEach(function (p) { if (p[1] > most) most = p[1]; });
        var fy = function (n) { return PAD.top + layout.ph - n / most * layout.ph * 0.2; };
        ctx.globalAlpha = 0.6;
        ctx.lineWidth = 1.2;
        ctx.beginPath();
        var last = 0;
        ctx.moveTo(xToPx(fl[0][0]), fy(0));
        fl.forEach(function (p) {
          ctx.lineTo(xToPx(p[0]), fy(last));
          ctx.lineTo(xToPx(p[0]), fy(p[1]));
          last = p[1];
        });
        ctx.stroke();
        ctx.globalAlpha = 1;
        ctx.textBaseline = 'bottom';
        ctx.fillText('runs in flight (at most ' + most + ')', PAD.left + 4, fy(most) - 2);
        ctx.textBaseline = 'top';
      }
      drawnSeries++;
    });
    ctx.restore();

    // Shift-drag selection.
    if (drag && drag.select && drag.nowPx !== undefined) {
      ctx.fillStyle = 'rgba(47, 109, 181, 0.12)';
      var a = Math.min(drag.startPx, drag.nowPx), b = Math.max(drag.startPx, drag.nowPx);
      ctx.fillRect(a, PAD.top, b - a, layout.ph);
    }
    drawHover(yToPx);
    document.getElementById('range').textContent =
      'showing ' + fmtTime(view.x0) + ' – ' + fmtTime(view.x1) + ' of ' + fmtTime(full.x1);
    document.body.setAttribute('data-series', String(drawnSeries));
    drawGpu();
  }

  // The GPU panel: each visible series' gpu_bytes as a step line, on the main chart's time view.
  var gpuCanvas = document.getElementById('gpu-chart');
  function drawGpu() {
    if (!gpuCanvas) return;
    var g = gpuCanvas.getContext('2d');
    var dpr = window.devicePixelRatio || 1;
    var w = gpuCanvas.parentNode.clientWidth || layout.w, h = gpuCanvas.parentNode.clientHeight || 220;
    gpuCanvas.width = Math.round(w * dpr);
    gpuCanvas.height = Math.round(h * dpr);
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    var pw = w - PAD.left - PAD.right, ph = h - PAD.top - PAD.bottom;
    var gx = function (t) { return PAD.left + (t - view.x0) / (view.x1 - view.x0) * pw; };
    var max = 0;
    series.forEach(function (s) {
      if (!s.visible || !s.data.gpu_v) return;
      var r = visibleRange(s.data.gpu_t);
      for (var i = r[0]; i < r[1]; i++) if (s.data.gpu_v[i] > max) max = s.data.gpu_v[i];
    });
    if (max <= 0) max = 1024;
    var u = 0, unit = 1;
    while (max / unit >= 1024 && u < UNITS.length - 1) { unit *= 1024; u++; }
    var step = niceStep(max / unit * 1.05, 4) * unit;
    var top = Math.ceil(max * 1.05 / step) * step;
    var gy = function (v) { return PAD.top + ph * (1 - v / top); };
    g.clearRect(0, 0, w, h);
    g.font = '12px system-ui, sans-serif';
    g.strokeStyle = '#e6e9ef';
    g.fillStyle = '#5b6577';
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (var v = 0; v <= top + step / 2; v += step) {
      var py = Math.round(gy(v)) + 0.5;
      g.beginPath(); g.moveTo(PAD.left, py); g.lineTo(PAD.left + pw, py); g.stroke();
      g.fillText((v / unit).toFixed(step / unit >= 1 ? 0 : 1) + ' ' + UNITS[u], PAD.left - 6, py);
    }
    g.textAlign = 'center';
    g.textBaseline = 'top';
    g.fillText('GPU memory of the tree (device), time as above', PAD.left + pw / 2, PAD.top + ph + 8);
    g.strokeStyle = '#9aa3b2';
    g.strokeRect(PAD.left + 0.5, PAD.top + 0.5, pw, ph);
    g.save();
    g.beginPath(); g.rect(PAD.left, PAD.top, pw, ph); g.clip();
    var drawn = 0;
    series.forEach(function (s) {
      var tt = s.data.gpu_t, vv = s.data.gpu_v;
      if (!s.visible || !tt || !tt.length) return;
      var r = visibleRange(tt), cut = breakSet(s.data.gpu_breaks);
      g.strokeStyle = s.color;
      g.lineWidth = 1.6;
      g.setLineDash(s.dashed ? [6, 3] : []);
      g.beginPath();
      for (var i = r[0]; i < r[1]; i++) {
        var x = gx(tt[i]), y = gy(vv[i]);
        // A step: a GPU value holds until the next reading.
        if (i === r[0] || cut[i]) g.moveTo(x, y); else { g.lineTo(x, gy(vv[i - 1])); g.lineTo(x, y); }
      }
      g.stroke();
      drawn++;
    });
    g.restore();
    document.body.setAttribute('data-gpu-series', String(drawn));
  }

  // For each visible series, the points under the cursor (within 3 pixels): where several are
  // (a dense recording), their lowest and highest, so a peak under the cursor is never hidden;
  // where none, the nearest point in time.
  function underCursor(px) {
    var out = [];
    var a = pxToX(px - 3), b = pxToX(px + 3), t = pxToX(px);
    series.forEach(function (s) {
      if (!s.visible || !s.data.t.length) return;
      var tt = s.data.t, vv = s.data.v;
      var i = lowerBound(tt, a), j = lowerBound(tt, b + 1e-12);
      if (j - i >= 2) {
        var lo = i, hi = i;
        for (var k = i; k < j; k++) { if (vv[k] < vv[lo]) lo = k; if (vv[k] > vv[hi]) hi = k; }
        out.push({ s: s, t: tt[hi], v: vv[hi], tMin: tt[lo], vMin: vv[lo] });
        return;
      }
      var n = lowerBound(tt, t);
      if (n >= tt.length) n = tt.length - 1;
      if (n > 0 && Math.abs(tt[n - 1] - t) <= Math.abs(tt[n] - t)) n--;
      out.push({ s: s, t: tt[n], v: vv[n] });
    });
    return out;
  }

  function drawHover(yToPx) {
    if (!hover || drag || hover.px < PAD.left || hover.px > PAD.left + layout.pw) {
      tooltip.hidden = true;
      return;
    }
    var t = pxToX(hover.px);
    var pts = underCursor(hover.px);
    if (!pts.length) { tooltip.hidden = true; return; }
    ctx.strokeStyle = 'rgba(29, 36, 48, 0.35)';
    ctx.lineWidth = 1;
    var cx = Math.round(hover.px) + 0.5;
    ctx.beginPath(); ctx.moveTo(cx, PAD.top); ctx.lineTo(cx, PAD.top + layout.ph); ctx.stroke();
    pts.forEach(function (p) {
      ctx.fillStyle = p.s.color;
      ctx.beginPath(); ctx.arc(xToPx(p.t), yToPx(p.v), 3.5, 0, 2 * Math.PI); ctx.fill();
    });
    // Text built with DOM nodes: file names are data, never markup.
    tooltip.textContent = '';
    var head = document.createElement('div');
    head.textContent = 't = ' + fmtTime(t);
    tooltip.appendChild(head);
    pts.forEach(function (p) {
      var row = document.createElement('div');
      var sw = document.createElement('span');
      sw.className = 'sw';
      sw.style.background = p.s.color;
      row.appendChild(sw);
      var text = p.vMin !== undefined && p.vMin !== p.v
        ? p.s.data.name + ': ' + fmtBytes(p.vMin) + ' – ' + fmtBytes(p.v) + ' (highest at ' + fmtTime(p.t) + ')'
        : p.s.data.name + ': ' + fmtBytes(p.v) + ' at ' + fmtTime(p.t);
      row.appendChild(document.createTextNode(text));
      tooltip.appendChild(row);
    });
    tooltip.hidden = false;
    var tw = tooltip.offsetWidth, th = tooltip.offsetHeight;
    var left = hover.px + 14, top = hover.py + 14;
    if (left + tw > layout.w) left = hover.px - tw - 14;
    if (top + th > layout.h) top = Math.max(0, hover.py - th - 14);
    tooltip.style.left = Math.max(0, left) + 'px';
    tooltip.style.top = top + 'px';
  }

  // ---- interaction ----
  function localPos(e) {
    var r = canvas.getBoundingClientRect();
    return { px: e.clientX - r.left, py: e.clientY - r.top };
  }
  function setView(x0, x1) {
    var span = Math.max(1e-3, Math.min(x1 - x0, full.x1 - full.x0));
    if (x0 < full.x0) x0 = full.x0;
    if (x0 + span > full.x1) x0 = full.x1 - span;
    view.x0 = x0;
    view.x1 = x0 + span;
  }
  function zoomAt(px, factor) {
    var t = pxToX(px);
    setView(t - (t - view.x0) * factor, t + (view.x1 - t) * factor);
    draw();
  }
  function reset() { view.x0 = full.x0; view.x1 = full.x1; draw(); }

  canvas.addEventListener('wheel', function (e) {
    e.preventDefault();
    zoomAt(localPos(e).px, e.deltaY < 0 ? 1 / 1.25 : 1.25);
  }, { passive: false });
  canvas.addEventListener('mousedown', function (e) {
    var p = localPos(e);
    drag = { startPx: p.px, x0: view.x0, x1: view.x1, select: e.shiftKey };
  });
  window.addEventListener('mousemove', function (e) {
    var p = localPos(e);
    if (drag) {
      if (drag.select) {
        drag.nowPx = p.px;
      } else {
        var dt = (p.px - drag.startPx) / layout.pw * (drag.x1 - drag.x0);
        setView(drag.x0 - dt, drag.x1 - dt);
      }
      draw();
    }
  });
  canvas.addEventListener('mousemove', function (e) {
    hover = localPos(e);
    if (!drag) draw();
  });
  canvas.addEventListener('mouseleave', function () { hover = null; if (!drag) draw(); });
  window.addEventListener('mouseup', function (e) {
    if (!drag) return;
    var d = drag;
    drag = null;
    if (d.select && d.nowPx !== undefined && Math.abs(d.nowPx - d.startPx) > 3) {
      var a = pxToX(Math.min(d.startPx, d.nowPx)), b = pxToX(Math.max(d.startPx, d.nowPx));
      setView(a, b);
    }
    draw();
  });
  canvas.addEventListener('dblclick', reset);
  document.getElementById('reset').addEventListener('click', reset);
  window.addEventListener('resize', function () { resize(); draw(); });

  // Legend: click a name to hide or show its series.
  var legend = document.getElementById('legend');
  series.forEach(function (s) {
    var label = document.createElement('label');
    var sw = document.createElement('span');
    sw.className = 'sw';
    sw.style.background = s.color;
    label.appendChild(sw);
    var role = s.data.role === 'base' ? 'baseline: ' : s.data.role === 'new' ? 'candidate: ' : '';
    label.appendChild(document.createTextNode(role + s.data.name + ' (peak ' + s.data.peak_at_least + fmtBytes(s.data.peak.bytes) + ')'));
    label.addEventListener('click', function () {
      s.visible = !s.visible;
      label.className = s.visible ? '' : 'off';
      draw();
    });
    legend.appendChild(label);
  });
  var samples = 0, kept = 0;
  series.forEach(function (s) { samples += s.data.samples; kept += s.data.kept; });
  var notes = [kept < samples
    ? 'Drawn from ' + kept + ' of ' + samples + ' samples: each of ~2000 time buckets per recording keeps its first, lowest, highest and last sample, so no peak is lost.'
    : 'All ' + samples + ' samples are drawn.'];
  series.forEach(function (s) { if (s.data.events_note) notes.push(s.data.events_note + '.'); });
  document.getElementById('decimation-note').textContent = notes.join(' ');

  resize();
  draw();

  // ---- self-test: zoom, pan, reset, then hover the first series' peak ----
  if (window.location.hash === '#selftest') {
    var r = canvas.getBoundingClientRect();
    var mid = r.left + PAD.left + layout.pw / 2, midY = r.top + PAD.top + layout.ph / 2;
    canvas.dispatchEvent(new WheelEvent('wheel', { deltaY: -100, clientX: mid, clientY: midY, bubbles: true, cancelable: true }));
    canvas.dispatchEvent(new MouseEvent('mousedown', { clientX: mid, clientY: midY, bubbles: true }));
    window.dispatchEvent(new MouseEvent('mousemove', { clientX: mid + 40, clientY: midY, bubbles: true }));
    window.dispatchEvent(new MouseEvent('mouseup', { clientX: mid + 40, clientY: midY, bubbles: true }));
    reset();
    var first = series[0].data, peak = 0;
    for (var i = 1; i < first.v.length; i++) if (first.v[i] > first.v[peak]) peak = i;
    var px = first.t.length ? xToPx(first.t[peak]) : PAD.left + layout.pw / 2;
    canvas.dispatchEvent(new MouseEvent('mousemove', { clientX: r.left + px, clientY: r.top + PAD.top + 40, bubbles: true }));
    var out = document.getElementById('selftest-hover');
    out.textContent = tooltip.hidden ? '' : tooltip.innerText || tooltip.textContent;
    document.body.setAttribute('data-selftest', 'done');
  }
})();

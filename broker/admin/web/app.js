// kaas inspector — one page, four views, all fed by the broker's event
// stream (/api/stream): the broker sends the whole view once a second and
// the page updates in place (charts by uPlot, tables and trees as HTML).
// The URL names the view and the actor (/actors/<kind>/<name>) and carries
// the name filter (?q=), so any view can be linked to.
'use strict';
(() => {
  const main = document.getElementById('main');
  const qInput = document.getElementById('q');
  const live = document.getElementById('live');
  const ident = document.getElementById('ident');

  // ---- formatting ------------------------------------------------------
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  const nf0 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  const nf1 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });
  const nf2 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });
  const num = (n) => (n == null ? '—' : Math.abs(n) < 10 && n % 1 !== 0 ? nf2.format(n) : Math.abs(n) < 100 && n % 1 !== 0 ? nf1.format(n) : nf0.format(n));
  const bytes = (n) => {
    if (n == null) return '—';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? nf0 : nf1).format(n) + ' ' + u[i];
  };
  const ms = (v) => {
    if (v == null) return '—';
    const a = Math.abs(v);
    if (a < 1) return nf0.format(v * 1000) + ' µs';
    if (a < 1000) return nf1.format(v) + ' ms';
    return dur(v / 1000);
  };
  const dur = (sec) => {
    if (sec == null) return '—';
    const neg = sec < 0; let s = Math.abs(sec);
    let out;
    if (s < 60) out = nf1.format(s) + ' s';
    else if (s < 3600) out = Math.floor(s / 60) + 'm ' + Math.floor(s % 60) + 's';
    else if (s < 86400) out = Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
    else out = Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
    return (neg ? '−' : '') + out;
  };
  const toDate = (t) => (typeof t === 'number' ? new Date(t) : new Date(t));
  const clock = (t) => toDate(t).toLocaleTimeString('en-GB', { hour12: false });
  const ago = (t) => dur((Date.now() - toDate(t).getTime()) / 1000) + ' ago';
  const pad = (s, n) => String(s).padStart(n, '0');
  const stamp = (t) => { const d = toDate(t); return `${d.getFullYear()}-${pad(d.getMonth() + 1, 2)}-${pad(d.getDate(), 2)} ${clock(d)}`; };
  const empty = (what = 'none') => `<span class="empty">${esc(what)}</span>`;

  // ---- routing ---------------------------------------------------------
  function route() {
    const p = location.pathname;
    if (p.startsWith('/actors/')) return { view: 'actor', name: decodeURIComponent(p.slice('/actors/'.length)) };
    if (p === '/kip360') return { view: 'kip360' };
    if (p === '/transactions') return { view: 'transactions' };
    return { view: 'overview' };
  }
  const actorHref = (name) => '/actors/' + name.split('/').map(encodeURIComponent).join('/');
  const actorLink = (name, label) => (name ? `<a href="${esc(actorHref(name))}" data-nav>${esc(label ?? name)}</a>` : esc(label ?? ''));
  const partitionLink = (p) => actorLink('partition/' + p, p);
  const txnLink = (id) => (id ? actorLink('txn/' + id, id) : empty('—'));

  function navigate(href, keepQuery) {
    const url = new URL(href, location.href);
    if (keepQuery && qInput.value.trim()) url.searchParams.set('q', qInput.value.trim());
    history.pushState(null, '', url.pathname + url.search);
    qInput.value = url.searchParams.get('q') || '';
    start();
  }
  document.addEventListener('click', (ev) => {
    const a = ev.target.closest('a[data-nav]');
    if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
    ev.preventDefault();
    navigate(a.getAttribute('href'), a.closest('.tabs') != null);
  });
  window.addEventListener('popstate', () => { qInput.value = new URL(location.href).searchParams.get('q') || ''; start(); });
  let qTimer;
  qInput.addEventListener('input', () => {
    clearTimeout(qTimer);
    qTimer = setTimeout(() => {
      const url = new URL(location.href);
      const q = qInput.value.trim();
      if (q) url.searchParams.set('q', q); else url.searchParams.delete('q');
      history.replaceState(null, '', url.pathname + url.search);
      if (current && current.view.filterLocally) current.view.update(current.last); else connect();
    }, 200);
  });

  // ---- the stream ------------------------------------------------------
  let es = null;
  let current = null; // {route, view, last}
  function setLive(state, text) { live.className = 'live ' + state; live.textContent = text; }

  function start() {
    const r = route();
    document.querySelectorAll('.tabs a').forEach((a) => a.classList.toggle('on', a.dataset.view === r.view));
    if (current && current.view.unmount) current.view.unmount();
    main.innerHTML = '';
    const view = views[r.view](r);
    current = { route: r, view, last: null };
    view.mount(main);
    connect();
  }

  function connect() {
    if (es) es.close();
    const r = current.route;
    const params = new URLSearchParams({ view: r.view });
    if (r.name) params.set('name', r.name);
    const q = qInput.value.trim();
    if (q && !current.view.filterLocally) params.set('q', q);
    setLive('', 'connecting');
    const mine = current;
    es = new EventSource('/api/stream?' + params);
    es.addEventListener('view', (ev) => {
      if (current !== mine) return;
      setLive('on', 'live');
      const data = JSON.parse(ev.data);
      mine.last = data;
      mine.view.update(data);
      if (data.broker) showIdent(data.broker, data.uptime_sec);
    });
    es.addEventListener('missing', (ev) => {
      if (current !== mine) return;
      setLive('on', 'live');
      main.innerHTML = `<div class="notfound"><h1>Not found</h1><p>${esc(JSON.parse(ev.data).error)}</p><p><a href="/" data-nav>Back to the overview</a></p></div>`;
    });
    es.onerror = () => setLive('off', 'reconnecting…');
  }

  // A browser allows six connections to one host over HTTP/1.1, and each
  // open stream holds one: a hidden tab or a page left for the
  // back/forward cache lets go of its stream, and takes it up again when
  // shown, so many tabs of the inspector never starve each other.
  function pause() { if (es) { es.close(); es = null; setLive('', 'paused'); } }
  document.addEventListener('visibilitychange', () => { if (document.hidden) pause(); else if (!es && current) connect(); });
  window.addEventListener('pagehide', pause);
  window.addEventListener('pageshow', (ev) => { if (ev.persisted && current) connect(); });

  function showIdent(b, up) {
    ident.textContent = `broker ${b.broker_id} · cluster ${b.cluster_id} · ${b.version || 'dev'} · up ${dur(up)}`;
  }
  fetch('/api/identity').then((r) => r.json()).then((o) => showIdent(o.broker, o.uptime_sec)).catch(() => {});

  // ---- charts ----------------------------------------------------------
  // chart draws time series with uPlot; series: [{label, color, fmt}].
  function chart(el, series, height = 150) {
    const opts = {
      width: Math.max(200, el.clientWidth), height,
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      legend: { show: false },
      // Always the last five minutes, so a chart's width means the same
      // time on every view; a broker up for less fills the right side.
      scales: { x: { time: true, range: (u, min, max) => [max - 300, max] }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [
        { stroke: '#5c6670', grid: { stroke: '#eef1f4' }, ticks: { stroke: '#dde2e7' }, font: '11px system-ui',
          values: (u, vals) => vals.map((v) => { const d = new Date(v * 1000); return d.getSeconds() ? clock(d) : clock(d).slice(0, 5); }) },
        { stroke: '#5c6670', grid: { stroke: '#eef1f4' }, ticks: { stroke: '#dde2e7' }, font: '11px system-ui', size: 50,
          values: (u, vals) => vals.map((v) => num(v)) },
      ],
      series: [{ value: (u, v) => (v == null ? '—' : clock(v * 1000)) }].concat(series.map((s) => ({
        label: s.label, stroke: s.color, width: 1.5, fill: s.fill || s.color + '1a', points: { show: false },
        value: (u, v) => (v == null ? '—' : (s.fmt || num)(v)), spanGaps: false,
      }))),
    };
    const u = new uPlot(opts, [[], ...series.map(() => [])], el);
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height }));
    ro.observe(el);
    return {
      set(t, ...ys) { if (t && t.length) u.setData([t, ...ys.map((y) => y.map((v) => (v < 0 ? null : v)))]); },
      destroy() { ro.disconnect(); u.destroy(); },
    };
  }

  // spark is a tiny inline SVG line for table cells.
  function spark(values, w = 110, h = 22, color = '#1f5fbf') {
    const v = (values || []).slice(-120);
    if (v.length < 2) return '';
    const max = Math.max(1e-9, ...v.filter((x) => x >= 0));
    const pts = v.map((x, i) => `${((i / (v.length - 1)) * w).toFixed(1)},${(x < 0 ? h : h - 1 - (x / max) * (h - 2)).toFixed(1)}`).join(' ');
    return `<svg class="spark" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}"><polyline fill="none" stroke="${color}" stroke-width="1.2" points="${pts}"/></svg>`;
  }

  const last = (a) => (a && a.length ? a[a.length - 1] : null);
  const panel = (id, title, note, body, right = '') =>
    `<section class="panel" id="${id}"><header><h2>${esc(title)}</h2>${note ? `<span class="note">${esc(note)}</span>` : ''}<span class="right">${right}</span></header>${body}</section>`;
  const card = (id, label) => `<section class="panel card" id="${id}"><div class="label">${esc(label)}</div><div class="body"></div></section>`;
  const setCard = (id, html) => { const el = document.querySelector(`#${id} .body`); if (el) el.innerHTML = html; };
  const setHTML = (id, html) => { const el = document.getElementById(id); if (el) el.innerHTML = html; };
  const table = (head, rows, none = 'none') =>
    `<table><thead><tr>${head.map((h) => (h.startsWith('#') ? `<th class="n">${esc(h.slice(1))}</th>` : `<th>${esc(h)}</th>`)).join('')}</tr></thead><tbody>${
      rows.length ? rows.join('') : `<tr><td colspan="${head.length}">${empty(none)}</td></tr>`}</tbody></table>`;

  // chips renders a digest {key: value} compactly.
  function chips(m) {
    const keys = Object.keys(m || {});
    if (!keys.length) return empty('no state published');
    return `<div class="chips">${keys.map((k) => `<span data-k="${esc(k)}"><b>${esc(k)}</b> ${scalar(k, m[k])}</span>`).join('')}</div>`;
  }

  // scalar renders one value the way a person reads it: no raw nulls,
  // sizes in bytes, times as times, -1 sentinels as "none".
  function scalar(key, v) {
    if (v === null || v === undefined) return empty('—');
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    if (typeof v === 'number') {
      if (v === -1 && /(offset|timestamp|_ms|start|epoch|sequence)$/.test(key)) return `<span class="empty" title="-1">none</span>`;
      if (/bytes$/.test(key)) return esc(bytes(v));
      if (/(_ms|timestamp)$/.test(key) && v > 1e12) return `<span title="${v}">${esc(stamp(v))}</span>`;
      if (/_ms$/.test(key)) return esc(ms(v));
      if (/_sec$/.test(key)) return esc(dur(v));
      if (/(producer_id|pid)$/.test(key)) return esc(String(v));
      return esc(num(v));
    }
    if (typeof v === 'string') {
      if (v === '') return empty('empty');
      if (/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/.test(v)) return v.startsWith('0001-') ? empty('never') : `<span title="${esc(v)}">${esc(stamp(v))}</span>`;
      return `<span class="s">${esc(v)}</span>`;
    }
    return esc(JSON.stringify(v));
  }

  // ---- state tree --------------------------------------------------------
  // tree renders any JSON value as nested lists; open/closed state survives
  // updates (keyed by path), and a query keeps only matching branches.
  function tree(value, openPaths, q) {
    const match = (s) => q && String(s).toLowerCase().includes(q);
    const hasMatch = (v, k) => {
      if (!q) return true;
      if (match(k)) return true;
      if (v !== null && typeof v === 'object') return Object.entries(v).some(([kk, vv]) => hasMatch(vv, kk));
      return match(v);
    };
    const label = (k) => (match(k) ? `<span class="k hit">${esc(k)}</span>` : `<span class="k">${esc(k)}</span>`);
    function node(k, v, path, depth) {
      if (v !== null && typeof v === 'object') {
        const entries = Array.isArray(v) ? v.map((x, i) => [hint(x, i), x]) : Object.entries(v);
        if (!entries.length) return `<li class="leaf">${label(k)}: ${empty(Array.isArray(v) ? 'none' : 'empty')}</li>`;
        const kept = entries.filter(([kk, vv]) => match(k) || hasMatch(vv, kk));
        const open = openPaths.has(path) ? openPaths.get(path) : q ? true : depth < 1 || entries.length <= 8;
        const count = Array.isArray(v) ? `${v.length} item${v.length === 1 ? '' : 's'}` : `${entries.length} field${entries.length === 1 ? '' : 's'}`;
        return `<li><details data-path="${esc(path)}"${open ? ' open' : ''}><summary>${label(k)}<span class="count">${count}</span></summary><ul>${
          kept.map(([kk, vv], i) => node(kk, vv, path + '/' + (Array.isArray(v) ? i : kk), depth + 1)).join('')}</ul></details></li>`;
      }
      const val = scalar(String(k), v);
      return `<li class="leaf">${label(k)}: <span class="v${typeof v === 'string' ? ' s' : ''}${match(v) ? ' hit' : ''}">${val}</span></li>`;
    }
    // hint names a list element by its most telling field.
    function hint(x, i) {
      if (x && typeof x === 'object') {
        for (const f of ['name', 'member_id', 'producer_id', 'transactional_id', 'partition', 'path', 'file', 'slot', 'group', 'topic']) {
          if (x[f] !== undefined && x[f] !== null && typeof x[f] !== 'object') return `[${i}] ${f.replace(/_/g, ' ')} ${x[f]}`;
        }
      }
      return `[${i}]`;
    }
    if (value === null || value === undefined) return empty('no state');
    if (typeof value !== 'object') return `<ul>${node('value', value, '', 0)}</ul>`;
    const entries = Object.entries(value).filter(([k, v]) => hasMatch(v, k));
    if (!entries.length) return q ? empty('nothing matches the filter') : empty('empty');
    return `<ul>${entries.map(([k, v]) => node(k, v, '/' + k, 0)).join('')}</ul>`;
  }

  // ---- events --------------------------------------------------------------
  const kindLabel = { epoch_bump: 'epoch bump', fence: 'fence', zombie_rejected: 'zombie rejected' };
  function eventRow(e) {
    let epochs = '', reason = esc(e.reason || ''), where = '';
    switch (e.kind) {
      case 'epoch_bump':
        epochs = e.prev_producer_id ? `pid ${e.prev_producer_id} → <b>${e.producer_id}</b>, epoch ${e.epoch}` : `${e.prev_epoch} → <b>${e.epoch}</b>`;
        break;
      case 'fence':
        epochs = `${e.prev_epoch < 0 ? 'no floor' : 'floor ' + e.prev_epoch} → <b>${e.epoch}</b>`;
        where = e.where ? esc(e.where) : 'every local partition';
        break;
      case 'zombie_rejected':
        epochs = `batch epoch <b>${e.epoch}</b> &lt; ${e.prev_epoch} in force`;
        where = partitionLink(e.where);
        reason = `<span class="badge bad">${esc(e.code)}</span>`;
        break;
    }
    return `<tr data-event="${e.seq}" data-kind="${esc(e.kind)}"><td class="n" title="${esc(e.at)}">${esc(clock(e.at))}</td><td><span class="badge ${esc(e.kind)}">${esc(kindLabel[e.kind] || e.kind)}</span></td>` +
      `<td class="mono" data-f="pid">${esc(e.producer_id)}</td><td>${txnLink(e.transactional_id)}</td><td data-f="epochs">${epochs}</td><td>${reason}</td><td>${where}</td>` +
      `<td class="n">${e.lag_ms ? esc(ms(e.lag_ms)) : ''}</td></tr>`;
  }
  const eventHead = ['#time', 'what', 'producer id', 'transactional id', 'epoch', 'why', 'where', '#lag'];

  // timeline draws events as marks on a time axis, one row per kind.
  function timeline(svg, evs) {
    const w = Math.max(300, svg.clientWidth || 800), h = 118, left = 110, right = 12;
    const now = Date.now();
    const times = evs.map((e) => new Date(e.at).getTime());
    const from = Math.min(now - 5 * 60e3, ...(times.length ? [Math.min(...times)] : [now]));
    const x = (t) => left + ((t - from) / Math.max(1, now - from)) * (w - left - right);
    const rows = [['epoch_bump', 22, 'var(--bump)'], ['fence', 52, 'var(--fence)'], ['zombie_rejected', 82, 'var(--zombie)']];
    let s = '';
    for (const [k, y] of rows) s += `<text x="4" y="${y + 4}">${kindLabel[k]}</text><line class="axis" x1="${left}" x2="${w - right}" y1="${y}" y2="${y}"/>`;
    for (let i = 0; i <= 4; i++) {
      const t = from + ((now - from) * i) / 4;
      s += `<text x="${Math.min(w - 50, x(t) - 22)}" y="${h - 4}">${clock(t)}</text>`;
    }
    for (const e of evs) {
      const row = rows.find((r) => r[0] === e.kind);
      if (!row) continue;
      const title = `${clock(e.at)} ${kindLabel[e.kind]} producer ${e.producer_id} epoch ${e.epoch}${e.reason ? ' (' + e.reason + ')' : ''}${e.where ? ' at ' + e.where : ''}`;
      s += `<circle cx="${x(new Date(e.at).getTime()).toFixed(1)}" cy="${row[1]}" r="5" fill="${row[2]}" fill-opacity=".75"><title>${esc(title)}</title></circle>`;
    }
    svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
    svg.innerHTML = s;
  }

  // ---- views ---------------------------------------------------------------
  const views = {};

  views.overview = () => {
    let charts = [];
    return {
      mount(el) {
        el.innerHTML =
          `<div class="grid cards">${card('c-broker', 'Broker')}${card('c-uptime', 'Uptime')}${card('c-disk', 'Data directory')}${card('c-actors', 'Actors')}</div>` +
          `<div class="grid charts">${panel('p-depth', 'Mailbox depth', 'all actors, last 5 min', '<div class="chart" id="ch-depth"></div>', '<span id="v-depth"></span>')}` +
          `${panel('p-rate', 'Messages/s', 'all actors, last 5 min', '<div class="chart" id="ch-rate"></div>', '<span id="v-rate"></span>')}` +
          `${panel('p-req', 'Requests/s', 'all APIs, last 5 min', '<div class="chart" id="ch-req"></div>', '<span id="v-req"></span>')}</div>` +
          `<div class="grid split">${panel('p-kinds', 'Actors by kind', 'now', '<div id="t-kinds"></div>')}` +
          `${panel('p-apis', 'Requests by API', 'last 10 s · the counters /metrics exports', '<div class="scroll" id="t-apis"></div>')}</div>` +
          panel('p-conns', 'Client connections', 'who each authenticated as, and how', '<div class="scroll" id="t-conns"></div>', '<span id="n-conns"></span>') +
          `<div id="panels"></div>` +
          panel('p-actors', 'Actors', 'click one for its state, history and links', '<div class="scroll" id="t-actors"></div>', '<span id="n-actors"></span>');
        charts = [
          chart(document.getElementById('ch-depth'), [{ label: 'depth', color: '#6b3fb3' }]),
          chart(document.getElementById('ch-rate'), [{ label: 'msgs/s', color: '#1f5fbf' }]),
          chart(document.getElementById('ch-req'), [{ label: 'req/s', color: '#1e7a3c' }]),
        ];
      },
      unmount() { charts.forEach((c) => c.destroy()); },
      update(o) {
        const b = o.broker;
        setCard('c-broker', `<div class="big">broker ${esc(b.broker_id)}</div><dl>` +
          `<dt>cluster</dt><dd class="mono">${esc(b.cluster_id)}</dd><dt>version</dt><dd>${esc(b.version || 'dev')} · ${esc(b.go_version)}</dd>` +
          `<dt>listener</dt><dd class="mono">${esc(b.listen)}</dd><dt>advertised</dt><dd class="mono">${esc(b.advertised)}</dd>` +
          `<dt>admin</dt><dd class="mono">${esc(b.admin)}</dd><dt>pid</dt><dd>${esc(b.pid)}</dd></dl>`);
        setCard('c-uptime', `<div class="big">${esc(dur(o.uptime_sec))}</div><div class="small">since ${esc(stamp(b.started))}</div>`);
        const d = o.disk;
        if (d.measured_at) {
          const usedFS = d.fs_total_bytes ? 1 - d.fs_free_bytes / d.fs_total_bytes : 0;
          setCard('c-disk', `<div class="big">${esc(bytes(d.used_bytes))}</div><div class="small mono" title="${esc(d.data_dir)}">${esc(d.data_dir)}</div>` +
            `<div class="small">${esc(num(d.files))} files · measured ${esc(ago(d.measured_at))}</div>` +
            (d.fs_total_bytes ? `<div class="bar${usedFS > .9 ? ' bad' : usedFS > .75 ? ' warn' : ''}"><i style="width:${(usedFS * 100).toFixed(1)}%"></i></div>` +
              `<div class="small">filesystem ${esc(bytes(d.fs_free_bytes))} free of ${esc(bytes(d.fs_total_bytes))}</div>` : '') +
            (d.error ? `<div class="small">${esc(d.error)}</div>` : ''));
        } else setCard('c-disk', `<div class="big">…</div><div class="small mono">${esc(d.data_dir || b.data_dir)}</div><div class="small">measuring</div>`);
        const total = o.kinds.reduce((a, k) => a + k.actors, 0);
        setCard('c-actors', `<div class="big" data-f="actors">${esc(num(total))}</div><div class="small">${o.kinds.map((k) => `${esc(num(k.actors))} ${esc(k.kind)}`).join(' · ') || 'none'}</div>`);

        const t = o.totals.t, v = o.totals.values;
        charts[0].set(t, v.mailbox_depth); charts[1].set(t, v.messages_per_sec); charts[2].set(t, v.requests_per_sec);
        setHTML('v-depth', `now ${esc(num(last(v.mailbox_depth)))}`);
        setHTML('v-rate', `now ${esc(num(last(v.messages_per_sec)))}/s`);
        setHTML('v-req', `now ${esc(num(last(v.requests_per_sec)))}/s`);

        setHTML('t-kinds', table(['kind', '#actors', '#mailbox depth', '#deepest', '#msgs/s'], o.kinds.map((k) =>
          `<tr data-kind="${esc(k.kind)}"><td><a href="/?q=${encodeURIComponent(k.kind + '/')}" data-nav><span class="badge kind">${esc(k.kind)}</span></a></td>` +
          `<td class="n">${esc(num(k.actors))}</td><td class="n">${esc(num(k.mailbox_depth))}</td><td class="n">${esc(num(k.max_mailbox_depth))}</td><td class="n">${esc(num(k.messages_per_sec))}</td></tr>`)));
        setHTML('t-apis', table(['API', '#req/s', 'last 5 min', '#p50', '#p99', '#errors/s', 'errors sent'], o.apis.map((a) => {
          const errs = Object.entries(a.errors || {}).sort((x, y) => y[1] - x[1])
            .map(([n, c]) => `<span class="badge warn" title="${esc(n)}">${esc(n).replace(/_/g, '_<wbr>')} ×${esc(num(c))}</span>`).join(' ');
          return `<tr data-api="${esc(a.api)}"><td title="${esc(num(a.requests_total))} requests since start">${esc(a.api)}</td><td class="n">${esc(num(a.requests_per_sec))}</td><td>${spark(a.series.values.requests_per_sec)}</td>` +
            `<td class="n">${esc(ms(a.p50_ms))}</td><td class="n" title="mean ${esc(ms(a.mean_ms))}">${esc(ms(a.p99_ms))}</td><td class="n">${esc(num(a.errors_per_sec))}</td>` +
            `<td class="errs">${errs || empty('none')}</td></tr>`;
        }), 'no requests yet'));

        const conns = o.connections || [];
        setHTML('n-conns', `${conns.length} open`);
        setHTML('t-conns', table(['listener', 'protocol', 'remote', 'principal', 'SASL', 'TLS', 'opened'], conns.slice(0, 200).map((c) =>
          `<tr data-conn="${esc(c.id)}"><td>${esc(c.listener)}</td><td>${esc(c.protocol)}</td><td class="mono">${esc(c.remote)}</td>` +
          `<td>${esc(c.principal)}${c.authenticated ? '' : ' <span class="badge warn">authenticating</span>'}</td>` +
          `<td>${c.sasl_mechanism ? esc(c.sasl_mechanism) + (c.reauthentications ? ` · re-authenticated ×${esc(c.reauthentications)}` : '') : empty('—')}</td>` +
          `<td>${c.tls_version ? esc(c.tls_version) + (c.tls_client_subject ? ' · ' + esc(c.tls_client_subject) : '') : empty('—')}</td>` +
          `<td>${esc(ago(c.opened))}</td></tr>`), qInput.value.trim() ? 'no connection matches the filter' : 'no client connected'));
        setHTML('panels', (o.panels || []).map((p, i) => panel('x-panel-' + i, p.title, '', `<div class="scroll">${table(p.columns, p.rows.map((r, j) =>
          `<tr>${r.map((c, k) => `<td>${k === 0 && p.actors && p.actors[j] ? actorLink(p.actors[j], c) : esc(c)}</td>`).join('')}</tr>`))}</div>`)).join(''));

        const shown = o.actors.slice(0, 300);
        setHTML('n-actors', qInput.value.trim() ? `${o.actors.length} match “${esc(qInput.value.trim())}”` : `${o.actors.length} live`);
        setHTML('t-actors', table(['kind', 'name', '#mailbox', '#msgs/s', '#processed', '#last message', 'state'], shown.map((a) =>
          `<tr data-actor="${esc(a.name)}"><td><span class="badge kind">${esc(a.kind)}</span></td><td class="wrap">${actorLink(a.name)}</td>` +
          `<td class="n" data-f="depth">${esc(num(a.mailbox_depth))}</td><td class="n" data-f="rate">${esc(num(a.messages_per_sec))}</td>` +
          `<td class="n" data-f="processed">${esc(num(a.messages_processed))}</td><td class="n">${a.last_message_age_sec < 0 ? empty('never') : esc(dur(a.last_message_age_sec)) + ' ago'}</td>` +
          `<td data-f="summary">${chips(a.summary)}</td></tr>`), qInput.value.trim() ? 'no actor matches the filter' : 'no actors') +
          (o.actors.length > shown.length ? `<div class="more">${o.actors.length - shown.length} more — narrow the filter</div>` : ''));
      },
    };
  };

  views.actor = (r) => {
    let charts = [];
    const openPaths = new Map();
    return {
      filterLocally: true, // the filter narrows the state tree here
      mount(el) {
        const [kind] = r.name.split('/');
        // Kinds whose detail asks the actor (its state, a group's offsets)
        // rather than reading what it published.
        const asked = kind === 'partition' || kind === 'offsets' || kind === 'group';
        el.innerHTML = `<h1><span id="a-name">${esc(r.name)}</span> <span class="badge kind">${esc(kind)}</span> <span id="a-run"></span></h1>` +
          `<p class="sub" id="a-sub"></p>` +
          `<div class="grid cards">${card('a-depth', 'Mailbox depth')}${card('a-rate', 'Messages/s')}${card('a-processed', 'Processed')}${card('a-lastmsg', 'Last message')}</div>` +
          `<div class="grid charts">${panel('p-a-depth', 'Mailbox depth', 'last 5 min', '<div class="chart" id="ch-a-depth"></div>')}` +
          `${panel('p-a-rate', 'Messages/s', asked ? 'last 5 min · this page asks the actor for its state once a second' : 'last 5 min', '<div class="chart" id="ch-a-rate"></div>')}</div>` +
          `<div class="grid two">${panel('p-links', 'Related', '', '<div id="a-links"></div>')}${panel('p-a-events', 'KIP-360 events', 'newest first', '<div class="scroll" id="a-events"></div>')}</div>` +
          `<div id="a-offsets"></div>` +
          panel('p-state', 'State', 'as the actor published it · the filter narrows it', '<div class="tree" id="a-state"></div>');
        charts = [
          chart(document.getElementById('ch-a-depth'), [{ label: 'depth', color: '#6b3fb3' }], 130),
          chart(document.getElementById('ch-a-rate'), [{ label: 'msgs/s', color: '#1f5fbf' }], 130),
        ];
        document.getElementById('a-state').addEventListener('toggle', (ev) => {
          const p = ev.target.dataset && ev.target.dataset.path;
          if (p !== undefined) openPaths.set(p, ev.target.open);
        }, true);
      },
      unmount() { charts.forEach((c) => c.destroy()); },
      update(d) {
        if (!d) return;
        setHTML('a-run', d.running ? '<span class="badge ok">running</span>' : '<span class="badge warn">passivated</span>');
        setHTML('a-sub', d.running ? `up ${esc(dur(d.uptime_sec))}` : 'not running: shown from the coordinator\'s store');
        setCard('a-depth', `<div class="big" data-f="depth">${esc(num(d.mailbox_depth))}</div>`);
        setCard('a-rate', `<div class="big" data-f="rate">${esc(num(d.messages_per_sec))}</div>`);
        setCard('a-processed', `<div class="big" data-f="processed">${esc(num(d.messages_processed))}</div>`);
        setCard('a-lastmsg', `<div class="big">${d.last_message_age_sec < 0 ? empty('never') : esc(dur(d.last_message_age_sec)) + ' ago'}</div>`);
        charts[0].set(d.history.t, d.history.values.mailbox_depth);
        charts[1].set(d.history.t, d.history.values.messages_per_sec);
        const links = d.relations.links || [];
        setHTML('a-links', links.length ? `<div class="links">${links.map((l) =>
          `<div data-rel="${esc(l.rel)}"><span class="rel">${esc(l.rel)}</span>${l.actor && l.live ? actorLink(l.actor, l.label) : esc(l.label)}</div>`).join('')}</div>` : empty('no related actors'));
        setHTML('a-events', table(eventHead, (d.events || []).map(eventRow), 'no epoch bumps, fences or rejected zombies here'));
        const offs = d.relations.offsets;
        setHTML('a-offsets', offs ? panel('p-offsets', 'Committed offsets', 'with each partition\'s end', `<div class="scroll">${table(['partition', '#committed', '#log end', '#lag', 'metadata'], offs.map((o) =>
          `<tr data-partition="${esc(o.partition)}"><td>${actorLink(o.actor, o.partition)}</td><td class="n">${esc(num(o.offset))}</td><td class="n">${esc(num(o.log_end_offset))}</td>` +
          `<td class="n">${esc(num(o.lag))}</td><td>${o.metadata ? esc(o.metadata) : empty('—')}</td></tr>`), 'no committed offsets')}</div>`) : '');
        const keepScroll = window.scrollY;
        setHTML('a-state', tree(d.state, openPaths, qInput.value.trim().toLowerCase()));
        window.scrollTo(0, keepScroll);
      },
    };
  };

  views.kip360 = () => ({
    mount(el) {
      el.innerHTML = `<h1>KIP-360: epoch bumps and fencing</h1><p class="sub">Every epoch bump and why, the fence each puts in force on every partition at once, fences arriving from peers' fence files, and zombie batches of old sessions refused.</p>` +
        `<div class="grid cards">${card('k-bumps', 'Epoch bumps')}${card('k-fences', 'Fences')}${card('k-zombies', 'Zombie batches rejected')}${card('k-floors', 'Fenced producer ids')}</div>` +
        panel('p-tl', 'Timeline', 'the newest events of each kind', '<svg class="timeline" id="k-tl"></svg>') +
        panel('p-events', 'Events', 'newest first', '<div class="scroll" id="k-events"></div>') +
        `<div class="grid two">${panel('p-floors', 'Fences in force', 'broker-wide floors: each holds on every local partition', '<div class="scroll" id="k-floortable"></div>')}` +
        `${panel('p-peers', 'Fence files from peers', 'polled; lag = file written → applied here', '<div class="scroll" id="k-peers"></div>')}</div>` +
        panel('p-parts', 'Epoch in force per partition', 'DescribeProducers on each partition holding producer state', '<div class="scroll" id="k-parts"></div>', '<span id="k-parts-note"></span>');
    },
    update(k) {
      const count = (kind) => k.events.filter((e) => e.kind === kind).length;
      const rec = k.recorded || {};
      const fenceEv = k.events.filter((e) => e.kind === 'fence');
      setCard('k-bumps', `<div class="big" data-f="bumps">${esc(num(rec.epoch_bump || 0))}</div><div class="small">${esc(num(count('epoch_bump')))} shown</div>`);
      setCard('k-fences', `<div class="big">${esc(num(rec.fence || 0))}</div><div class="small">${esc(num(fenceEv.filter((e) => e.reason === 'local').length))} local · ${esc(num(fenceEv.filter((e) => e.reason === 'peer').length))} from peers shown</div>`);
      setCard('k-zombies', `<div class="big" data-f="zombies">${esc(num(rec.zombie_rejected || 0))}</div><div class="small">${esc(num(count('zombie_rejected')))} shown</div>`);
      setCard('k-floors', `<div class="big">${esc(num(k.fences.floors.length))}</div><div class="small">own fence file ${esc(k.fences.own_file)} · ${esc(num(k.fences.own_entries))} entries</div>`);
      timeline(document.getElementById('k-tl'), k.events);
      setHTML('k-events', table(eventHead, k.events.map(eventRow), 'no epoch bumps, fences or zombies yet'));
      setHTML('k-floortable', table(['producer id', 'transactional id', '#lowest epoch accepted'], k.fences.floors.map((f) =>
        `<tr data-pid="${esc(f.producer_id)}"><td class="mono">${esc(f.producer_id)}</td><td>${txnLink(f.transactional_id)}</td><td class="n">${esc(f.epoch)}</td></tr>`), 'no producer fenced'));
      setHTML('k-peers', table(['file', '#entries', 'written', 'last applied', '#lag'], k.fences.peer_files.map((p) =>
        `<tr><td class="mono wrap">${esc(p.file)}</td><td class="n">${esc(num(p.entries))}</td><td>${esc(ago(p.modified))}</td>` +
        `<td>${p.last_applied ? esc(ago(p.last_applied)) : empty('nothing new')}</td><td class="n">${p.last_applied ? esc(ms(p.lag_ms)) : ''}</td></tr>`),
      'no peer fence files (single broker, or no peer has bumped yet)'));
      const rows = [];
      for (const p of k.partitions) {
        if (p.error) rows.push(`<tr><td>${partitionLink(p.partition)}</td><td colspan="6">${esc(p.error)}</td></tr>`);
        for (const pr of p.producers) {
          rows.push(`<tr data-partition="${esc(p.partition)}" data-pid="${esc(pr.producer_id)}"><td>${partitionLink(p.partition)}</td><td class="mono">${esc(pr.producer_id)}</td>` +
            `<td>${txnLink(pr.transactional_id)}</td><td class="n" data-f="epoch">${esc(pr.epoch)}</td><td class="n">${pr.floor < 0 ? empty('—') : esc(pr.floor)}</td>` +
            `<td class="n">${esc(pr.last_sequence)}</td><td class="n">${pr.txn_start_offset < 0 ? empty('none') : esc(num(pr.txn_start_offset))}</td></tr>`);
        }
      }
      setHTML('k-parts', table(['partition', 'producer id', 'transactional id', '#epoch in force', '#floor', '#last sequence', '#open txn from'], rows, 'no partition holds producer state'));
      setHTML('k-parts-note', k.partitions_left_out ? `${k.partitions_left_out} more partitions — narrow the filter` : '');
    },
  });

  views.transactions = () => ({
    mount(el) {
      el.innerHTML = `<h1>Transactions</h1><p class="sub">What ListTransactions, DescribeTransactions and DescribeProducers report, in one place: open transactions against their timeout, the gap each holds between a partition's high watermark and its last stable offset (where read_committed consumers stop), and transactions nobody accounts for.</p>` +
        `<div class="grid cards">${card('x-c-open', 'Open transactions')}${card('x-c-oldest', 'Oldest open')}${card('x-c-gap', 'Partitions held back')}${card('x-c-hang', 'Hanging candidates')}</div>` +
        panel('p-open', 'Open transactions', 'age against transaction.timeout.ms; the reaper aborts past it', '<div class="scroll" id="x-open"></div>') +
        `<div class="grid two">${panel('p-lso', 'LSO vs high watermark', 'widest gap first', '<div class="scroll" id="x-lso"></div>', '<span id="x-lso-note"></span>')}` +
        `${panel('p-hang', 'Hanging-transaction candidates', 'open on a partition, not accounted for by the coordinator', '<div class="scroll" id="x-hang"></div>')}</div>` +
        panel('p-idle', 'Other transactional ids', 'not in a transaction', '<div class="scroll" id="x-idle"></div>');
    },
    update(x) {
      const gaps = x.partitions.filter((p) => p.gap > 0);
      setCard('x-c-open', `<div class="big" data-f="open">${esc(num(x.open.length))}</div>`);
      setCard('x-c-oldest', x.open.length ? `<div class="big">${esc(ms(x.open[0].age_ms))}</div><div class="small">${esc(x.open[0].transactional_id)}</div>` : `<div class="big">${empty('—')}</div>`);
      setCard('x-c-gap', `<div class="big">${esc(num(gaps.length))}</div><div class="small">of ${esc(num(x.partitions.length))} partitions</div>`);
      setCard('x-c-hang', `<div class="big">${esc(num(x.hanging.length))}</div><div class="small">max timeout ${esc(ms(x.max_timeout_ms))}</div>`);
      setHTML('x-open', table(['transactional id', 'producer id', '#epoch', 'state', 'partitions', 'age / timeout', '#reaper'], x.open.map((t) => {
        const frac = Math.min(1, t.age_ms / Math.max(1, t.timeout_ms));
        return `<tr data-txn="${esc(t.transactional_id)}"><td>${txnLink(t.transactional_id)}</td><td class="mono">${esc(t.producer_id)}</td><td class="n">${esc(t.epoch)}</td>` +
          `<td><span class="badge ${t.state === 'Ongoing' ? 'ok' : 'warn'}">${esc(t.state)}</span></td>` +
          `<td>${t.partitions.length ? t.partitions.map(partitionLink).join(', ') : empty('none yet')}${t.groups.length ? ' · groups ' + t.groups.map((g) => actorLink('group/' + g, g)).join(', ') : ''}</td>` +
          `<td data-f="age" style="min-width:170px">${esc(ms(t.age_ms))} / ${esc(ms(t.timeout_ms))}<div class="bar${frac > .9 ? ' bad' : frac > .6 ? ' warn' : ''}"><i style="width:${(frac * 100).toFixed(1)}%"></i></div></td>` +
          `<td class="n">${t.left_ms >= 0 ? 'in ' + esc(ms(t.left_ms)) : '<span class="badge bad">overdue</span>'}</td></tr>`;
      }), 'no open transactions'));
      const shown = x.partitions.slice(0, 200);
      setHTML('x-lso', table(['partition', '#high watermark', '#LSO', '#gap', 'held back by'], shown.map((p) =>
        `<tr data-partition="${esc(p.partition)}"><td>${partitionLink(p.partition)}</td><td class="n" data-f="hw">${esc(num(p.high_watermark))}</td><td class="n" data-f="lso">${esc(num(p.last_stable_offset))}</td>` +
        `<td class="n" data-f="gap">${p.gap > 0 ? `<span class="badge warn">${esc(num(p.gap))}</span>` : '0'}</td>` +
        `<td>${p.error ? esc(p.error) : p.open_txns.map((o) => `${txnLink(o.transactional_id)} <span class="muted">pid ${esc(o.producer_id)} from ${esc(num(o.first_offset))}</span>`).join('<br>') || (p.gap > 0 ? empty('—') : '')}</td></tr>`),
      'no partitions'));
      setHTML('x-lso-note', x.partitions.length > shown.length ? `${x.partitions.length - shown.length} more — narrow the filter` : '');
      setHTML('x-hang', table(['partition', 'producer id', '#first offset', 'transactional id', 'why'], x.hanging.map((h) =>
        `<tr data-partition="${esc(h.partition)}"><td>${partitionLink(h.partition)}</td><td class="mono">${esc(h.producer_id)}</td><td class="n">${esc(num(h.first_offset))}</td>` +
        `<td>${txnLink(h.transactional_id)}</td><td>${esc(h.reason)}</td></tr>`), 'none: every open transaction is the coordinator\'s'));
      setHTML('x-idle', table(['transactional id', 'state', 'producer id', '#epoch', 'last update'], x.idle.slice(0, 300).map((t) =>
        `<tr data-txn="${esc(t.transactional_id)}"><td>${txnLink(t.transactional_id)}</td><td><span class="badge">${esc(t.state)}</span></td><td class="mono">${esc(t.producer_id)}</td>` +
        `<td class="n">${esc(t.epoch)}</td><td>${t.last_update_ms > 0 ? esc(ago(t.last_update_ms)) : empty('never')}</td></tr>`), 'none'));
    },
  });

  qInput.value = new URL(location.href).searchParams.get('q') || '';
  start();
})();

// The operator's console (docs/guides/console.md): one page, served by api-auth at
// /ext/auth/console under a CSP that allows this script alone. Every value from the node
// is put on the page as text (textContent, never innerHTML), so a label such as
// <img src=x onerror=...> shows as those characters. The password goes to auth.signIn
// once and is dropped; the session is an HttpOnly cookie this script cannot read, and its
// CSRF value, which every call sends in X-Api-Auth-Csrf, is kept in sessionStorage for
// this tab only.
import uPlot from 'uplot';
import { collapseMethodSets, expandMethodSets, METHOD_SETS } from '../host/method-sets.js';

const AUTH = '/ext/auth';
const HEALTH = '/ext/auth/health';
const CSRF_KEY = 'api-auth-csrf';
/** Renewed this long before the session's end. */
const RENEW_BEFORE_MS = 5 * 60 * 1000;

interface RpcError {
  code: number;
  message: string;
}
type Answer<T> = { result: T; error?: undefined; retryAfter?: undefined } | { result?: undefined; error: RpcError; retryAfter?: number };

interface Quota {
  requests: number;
  per: string;
  used: number;
  resetsAt: string;
}
interface Token {
  id: string;
  label: string | null;
  endpoints: string[];
  methods: string[] | null;
  rateLimit: string | null;
  burst: number | null;
  quota: Quota | null;
  allowedClients: string[] | null;
  lastUsedAt: string | null;
  requests: number;
  issuedAt: string;
  expiresAt: string;
  revoked: boolean;
  rotatedFrom: string | null;
  rotatedTo: string | null;
}
interface Usage {
  bucketSeconds: number;
  from: string;
  hours: { at: string; requests: number; refusals: Record<string, number> }[];
}

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => document.getElementById(id) as T;

/** An element with text (never markup) and attributes. */
function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text?: string | null,
  attrs: Record<string, string> = {},
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  return node;
}

let csrf = sessionStorage.getItem(CSRF_KEY) ?? '';
let sessionEnd = 0;
let renewTimer: number | undefined;

/** One JSON-RPC call to /ext/auth, with the session's CSRF header. */
async function rpc<T>(method: string, params: Record<string, unknown> = {}): Promise<Answer<T>> {
  const response = await fetch(AUTH, {
    method: 'POST',
    credentials: 'same-origin',
    cache: 'no-store',
    headers: { 'Content-Type': 'application/json', 'X-Api-Auth-Csrf': csrf },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  let body: { result?: T; error?: RpcError };
  try {
    body = (await response.json()) as typeof body;
  } catch {
    return { error: { code: response.status, message: `the node answered HTTP ${response.status}` } };
  }
  const retry = Number(response.headers.get('Retry-After'));
  if (body.error !== undefined) return { error: body.error, retryAfter: Number.isFinite(retry) && retry > 0 ? retry : undefined };
  return { result: body.result as T };
}

/** A management call: a session that is over sends the operator back to sign in. */
async function call<T>(method: string, params: Record<string, unknown> = {}): Promise<Answer<T>> {
  const answer = await rpc<T>(method, params);
  if (answer.error?.code === -32000 && /session/.test(answer.error.message)) signedOut('Your session ended; sign in again.');
  return answer;
}

function started(answer: { csrf: string; expiresAt: string }): void {
  csrf = answer.csrf;
  sessionStorage.setItem(CSRF_KEY, csrf);
  sessionEnd = Date.parse(answer.expiresAt);
  window.clearTimeout(renewTimer);
  renewTimer = window.setTimeout(() => void renew(), Math.max(10_000, sessionEnd - Date.now() - RENEW_BEFORE_MS));
  showSession();
}

async function renew(): Promise<void> {
  const answer = await rpc<{ csrf: string; expiresAt: string }>('auth.renewSession');
  if (answer.result !== undefined) return started(answer.result);
  // Renewals have run as long as a sign-in lets them: the session goes on to its end.
  if (/cannot be renewed/.test(answer.error?.message ?? '')) {
    const end = () => signedOut('Your session reached its longest life; sign in again.');
    renewTimer = window.setTimeout(end, Math.max(0, sessionEnd - Date.now()));
    return;
  }
  if (answer.error?.code === -32000 && /session/.test(answer.error.message)) signedOut('Your session ended; sign in again.');
}

function showSession(): void {
  const end = new Date(sessionEnd);
  $('session-state').textContent = `Session until ${end.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}`;
}

function signedOut(message = ''): void {
  csrf = '';
  sessionStorage.removeItem(CSRF_KEY);
  window.clearTimeout(renewTimer);
  $('app').hidden = true;
  $('signin').hidden = false;
  $('signin-error').textContent = message;
  $<HTMLInputElement>('password').focus();
}

// ---- sign in

$('signin-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = $<HTMLInputElement>('password');
  const password = input.value;
  // Dropped from the page before the answer comes: nothing holds it after this call.
  input.value = '';
  const button = $<HTMLButtonElement>('signin-button');
  button.disabled = true;
  $('signin-error').textContent = '';
  void rpc<{ csrf: string; expiresAt: string }>('auth.signIn', { password }).then(
    (answer) => {
      button.disabled = false;
      if (answer.error !== undefined) {
        $('signin-error').textContent =
          answer.error.code === -32005
            ? `Too many failed attempts: wait ${answer.retryAfter ?? waitOf(answer.error.message)} s before the next one.`
            : answer.error.code === -32000
              ? 'Incorrect password.'
              : answer.error.message;
        return;
      }
      started(answer.result);
      enter();
    },
    () => {
      button.disabled = false;
      $('signin-error').textContent = 'The node cannot be reached.';
    },
  );
});

function waitOf(message: string): string {
  return /retry in (\d+) s/.exec(message)?.[1] ?? '?';
}

$('signout').addEventListener('click', () => {
  void rpc('auth.signOut').finally(() => signedOut('Signed out.'));
});

// ---- pages

const PAGES = ['tokens', 'issue', 'usage', 'node'];

function enter(): void {
  $('signin').hidden = true;
  $('app').hidden = false;
  route();
}

function route(): void {
  const page = PAGES.includes(location.hash.slice(1)) ? location.hash.slice(1) : 'tokens';
  for (const name of PAGES) $(`page-${name}`).hidden = name !== page;
  for (const link of document.querySelectorAll<HTMLAnchorElement>('nav a')) link.classList.toggle('active', link.dataset.page === page);
  if (page === 'tokens') void loadTokens();
  if (page === 'usage') void loadUsage();
  if (page === 'node') void loadNode();
}
window.addEventListener('hashchange', () => {
  if (!$('app').hidden) route();
});

// ---- tokens

let tokens: Token[] = [];
const selected = new Set<string>();
let sortKey: keyof Token = 'issuedAt';
let sortUp = false;

const COLUMNS: { key: keyof Token | ''; title: string }[] = [
  { key: '', title: '' },
  { key: 'id', title: 'ID' },
  { key: 'label', title: 'Label' },
  { key: 'endpoints', title: 'Endpoints' },
  { key: 'methods', title: 'Methods' },
  { key: 'rateLimit', title: 'Limits' },
  { key: 'allowedClients', title: 'Clients' },
  { key: 'issuedAt', title: 'Issued' },
  { key: 'expiresAt', title: 'Expires' },
  { key: 'lastUsedAt', title: 'Last used' },
  { key: 'requests', title: 'Requests' },
  { key: 'revoked', title: 'State' },
  { key: '', title: '' },
];

async function loadTokens(): Promise<void> {
  const answer = await call<{ tokens: Token[] }>('auth.listTokens');
  $('tokens-error').textContent = answer.error?.message ?? '';
  if (answer.result === undefined) return;
  tokens = answer.result.tokens;
  for (const id of [...selected]) if (!tokens.some((t) => t.id === id && !t.revoked)) selected.delete(id);
  renderTokens();
}

function state(t: Token): string {
  if (t.revoked) return t.rotatedTo !== null ? `rotated to ${t.rotatedTo}` : 'revoked';
  if (t.rotatedTo !== null) return `rotating to ${t.rotatedTo}`;
  return 'live';
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** "Dec 4 19:23" (UTC, as the node counts), the year too when it is not this one. */
function time(value: string | null): string {
  if (value === null) return '—';
  const d = new Date(value);
  const year = d.getUTCFullYear() === new Date().getUTCFullYear() ? '' : ` ${d.getUTCFullYear()}`;
  return `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}${year} ${d.toISOString().slice(11, 16)}`;
}

function limits(t: Token): string {
  const parts: string[] = [];
  if (t.rateLimit !== null) parts.push(`${t.rateLimit} (burst ${t.burst ?? '—'})`);
  if (t.quota !== null) parts.push(`quota ${t.quota.used}/${t.quota.requests} per ${t.quota.per}`);
  return parts.length === 0 ? '—' : parts.join(' · ');
}

function sortValue(t: Token, key: keyof Token): string | number {
  const v = t[key];
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (key === 'id') return Number(t.id.slice(1));
  if (Array.isArray(v)) return v.join(',');
  return v === null || typeof v === 'object' ? '' : v;
}

function renderTokens(): void {
  const head = $('tokens-head');
  head.replaceChildren();
  for (const column of COLUMNS) {
    const th = el('th', column.title);
    if (column.key !== '') {
      const key = column.key;
      th.classList.add('sortable');
      if (key === sortKey) th.classList.add(sortUp ? 'up' : 'down');
      th.addEventListener('click', () => {
        sortUp = key === sortKey ? !sortUp : true;
        sortKey = key;
        renderTokens();
      });
    }
    head.append(th);
  }
  const text = $<HTMLInputElement>('filter').value.trim().toLowerCase();
  const which = $<HTMLSelectElement>('state-filter').value;
  const shown = tokens.filter((t) => {
    if (which === 'live' && t.revoked) return false;
    if (which === 'revoked' && !t.revoked) return false;
    if (text === '') return true;
    return [t.id, t.label ?? '', ...t.endpoints, ...(t.methods ?? [])].some((s) => s.toLowerCase().includes(text));
  });
  shown.sort((a, b) => {
    const x = sortValue(a, sortKey);
    const y = sortValue(b, sortKey);
    return (x < y ? -1 : x > y ? 1 : 0) * (sortUp ? 1 : -1);
  });
  const body = $('tokens-body');
  body.replaceChildren();
  for (const t of shown) {
    const row = el('tr', null, { 'data-id': t.id });
    if (t.revoked) row.classList.add('dead');
    const box = el('input', null, { type: 'checkbox', 'aria-label': `select ${t.id}` });
    box.checked = selected.has(t.id);
    box.disabled = t.revoked;
    box.addEventListener('change', () => {
      if (box.checked) selected.add(t.id);
      else selected.delete(t.id);
      updateSelection();
    });
    const methods = t.methods === null ? ['every method'] : collapseMethodSets(t.methods);
    const cells: (string | HTMLElement)[] = [
      box,
      el('code', t.id),
      t.label ?? '—',
      chips(t.endpoints),
      chips(methods, t.methods === null ? 'all' : ''),
      limits(t),
      t.allowedClients === null ? 'anywhere' : t.allowedClients.join(', '),
      time(t.issuedAt),
      time(t.expiresAt),
      time(t.lastUsedAt),
      String(t.requests),
      el('span', state(t), { class: `badge ${t.revoked ? 'off' : t.rotatedTo !== null ? 'warn' : 'on'}` }),
      actions(t),
    ];
    for (const [i, cell] of cells.entries()) {
      const td = el('td', typeof cell === 'string' ? cell : null, {
        'data-col': COLUMNS[i].title.toLowerCase() || (i === 0 ? 'select' : 'actions'),
      });
      if (typeof cell !== 'string') td.append(cell);
      row.append(td);
    }
    body.append(row);
  }
  if (shown.length === 0) {
    const td = el('td', tokens.length === 0 ? 'No tokens yet: issue one.' : 'No token matches the filter.', {
      colspan: String(COLUMNS.length),
      class: 'empty',
    });
    const tr = el('tr');
    tr.append(td);
    body.append(tr);
  }
  const live = tokens.filter((t) => !t.revoked).length;
  $('token-summary').textContent = `${live} live · ${tokens.length - live} revoked · ${totalRequests(tokens)} requests (UTC times)`;
  updateSelection();
}

/** The node's requests: a rotated token's count is carried over to its successor, so only the last of each chain counts. */
function totalRequests(list: Token[]): number {
  return list.filter((t) => t.rotatedTo === null).reduce((n, t) => n + t.requests, 0);
}

function chips(items: string[], kind = ''): HTMLElement {
  const span = el('span', null, { class: 'chips' });
  for (const item of items) span.append(el('span', item, { class: `chip ${item.startsWith('@') ? 'set' : kind}` }));
  return span;
}

function actions(t: Token): HTMLElement {
  const span = el('span', null, { class: 'row-actions' });
  if (t.revoked) return span;
  const rotate = el('button', 'Rotate', { type: 'button', class: 'small' });
  rotate.addEventListener('click', () => void rotateTokens([t.id]));
  const revoke = el('button', 'Revoke', { type: 'button', class: 'small danger' });
  revoke.addEventListener('click', () => void revokeTokens([t.id]));
  span.append(rotate, revoke);
  return span;
}

function updateSelection(): void {
  $<HTMLButtonElement>('revoke-selected').disabled = selected.size === 0;
  $<HTMLButtonElement>('rotate-selected').disabled = selected.size === 0;
}

/** Asks the operator to confirm an action on `ids`. */
function confirmed(title: string, text: string, ids: string[], ok: string): Promise<boolean> {
  const dialog = $<HTMLDialogElement>('confirm');
  $('confirm-title').textContent = title;
  $('confirm-text').textContent = text;
  $('confirm-ok').textContent = ok;
  $('confirm-ok').className = ok === 'Revoke' ? 'danger' : 'primary';
  const list = $('confirm-list');
  list.replaceChildren(
    ...ids.map((id) => {
      const t = tokens.find((x) => x.id === id);
      return el('li', t?.label ? `${id} — ${t.label}` : id);
    }),
  );
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true }));
}

async function revokeTokens(ids: string[]): Promise<void> {
  if (
    !(await confirmed(
      ids.length === 1 ? `Revoke ${ids[0]}?` : `Revoke ${ids.length} tokens?`,
      'A revoked token is refused at once, on every gateway. This cannot be undone.',
      ids,
      'Revoke',
    ))
  )
    return;
  const failures: string[] = [];
  for (const id of ids) {
    const answer = await call('auth.revokeToken', { id });
    if (answer.error !== undefined) failures.push(`${id}: ${answer.error.message}`);
    selected.delete(id);
  }
  await loadTokens();
  $('tokens-error').textContent = failures.join('; ');
}

async function rotateTokens(ids: string[]): Promise<void> {
  if (
    !(await confirmed(
      ids.length === 1 ? `Rotate ${ids[0]}?` : `Rotate ${ids.length} tokens?`,
      'Each gets a new token of the same grant and label; the old one stops working now.',
      ids,
      'Rotate',
    ))
  )
    return;
  const issued: string[] = [];
  const failures: string[] = [];
  for (const id of ids) {
    const answer = await call<{ token: string; id: string }>('auth.rotateToken', { id });
    if (answer.error !== undefined) failures.push(`${id}: ${answer.error.message}`);
    else issued.push(`${answer.result.id}  ${answer.result.token}`);
    selected.delete(id);
  }
  await loadTokens();
  $('tokens-error').textContent = failures.join('; ');
  if (issued.length > 0) showNewToken(issued.length === 1 ? 'Rotated: the new token' : 'Rotated: the new tokens', issued.join('\n'));
}

$('filter').addEventListener('input', renderTokens);
$('state-filter').addEventListener('change', renderTokens);
$('refresh').addEventListener('click', () => void loadTokens());
$('revoke-selected').addEventListener('click', () => void revokeTokens([...selected]));
$('rotate-selected').addEventListener('click', () => void rotateTokens([...selected]));

function showNewToken(title: string, value: string): void {
  $('new-token-title').textContent = title;
  $('new-token-value').textContent = value;
  $('copied').textContent = '';
  $<HTMLDialogElement>('new-token').showModal();
}

$('copy').addEventListener('click', () => {
  const value = $('new-token-value').textContent ?? '';
  navigator.clipboard.writeText(value).then(
    () => {
      $('copied').textContent = 'Copied.';
    },
    () => {
      const range = document.createRange();
      range.selectNodeContents($('new-token-value'));
      getSelection()?.removeAllRanges();
      getSelection()?.addRange(range);
      $('copied').textContent = 'Selected: press Ctrl+C.';
    },
  );
});
// The token leaves the page when the dialog closes.
$('new-token').addEventListener('close', () => {
  $('new-token-value').textContent = '';
});

// ---- issue

const sets = $('f-sets');
for (const name of Object.keys(METHOD_SETS)) {
  const label = el('label', null, { class: 'check' });
  const box = el('input', null, { type: 'checkbox', value: name });
  label.append(box, el('span', name));
  label.title = METHOD_SETS[name].join(', ');
  sets.append(label);
}

function list(id: string): string[] {
  return $<HTMLInputElement>(id)
    .value.split(/[\s,]+/)
    .filter((s) => s !== '');
}

$('issue-form').addEventListener('submit', (event) => {
  event.preventDefault();
  for (const span of document.querySelectorAll('[data-error]')) span.textContent = '';
  for (const input of document.querySelectorAll('[data-field]')) input.classList.remove('invalid');
  $('issue-error').textContent = '';
  const params: Record<string, unknown> = { endpoints: list('f-endpoints') };
  const label = $<HTMLInputElement>('f-label').value;
  if (label !== '') params.label = label;
  const chosen = [...sets.querySelectorAll<HTMLInputElement>('input:checked')].map((b) => b.value);
  const methods = [...chosen, ...list('f-methods')];
  if (methods.length > 0) params.methods = expandMethodSets(methods);
  const text = (id: string): string => $<HTMLInputElement>(id).value.trim();
  if (text('f-expires') !== '') params.expiresIn = text('f-expires');
  if (text('f-rate') !== '') params.rateLimit = text('f-rate');
  if (text('f-burst') !== '') params.burst = /^\d+$/.test(text('f-burst')) ? Number(text('f-burst')) : text('f-burst');
  if (text('f-quota') !== '')
    params.quota = {
      requests: /^\d+$/.test(text('f-quota')) ? Number(text('f-quota')) : text('f-quota'),
      per: $<HTMLSelectElement>('f-quota-per').value,
    };
  if (text('f-clients') !== '') params.allowedClients = list('f-clients');
  const button = $<HTMLButtonElement>('issue-button');
  button.disabled = true;
  void call<{ token: string; id: string }>('auth.newToken', params).then((answer) => {
    button.disabled = false;
    if (answer.error !== undefined) {
      // "invalid params: <field> ...": the refusal goes next to its field.
      const field = /^invalid params: ([A-Za-z]+)/.exec(answer.error.message)?.[1];
      const span = field === undefined ? null : document.querySelector(`[data-error="${field}"]`);
      if (span !== null) {
        span.textContent = answer.error.message.replace(/^invalid params: /, '');
        document.querySelector(`[data-field="${field}"]`)?.classList.add('invalid');
      } else {
        $('issue-error').textContent = answer.error.message;
      }
      return;
    }
    $<HTMLFormElement>('issue-form').reset();
    showNewToken(`New token ${answer.result.id}`, answer.result.token);
  });
});

// ---- usage

let chart: uPlot | null = null;

async function loadUsage(): Promise<void> {
  const select = $<HTMLSelectElement>('usage-token');
  const answer = await call<{ tokens: Token[] }>('auth.listTokens');
  if (answer.result !== undefined) {
    const keep = select.value;
    select.replaceChildren(
      el('option', 'The whole node', { value: '' }),
      ...answer.result.tokens.map((t) => el('option', t.label === null ? t.id : `${t.id} — ${t.label}`, { value: t.id })),
    );
    select.value = keep;
  }
  const params: Record<string, unknown> = { hours: 168 };
  if (select.value !== '') params.id = select.value;
  const usage = await call<Usage>('auth.usageHistory', params);
  const message = $('usage-message');
  chart?.destroy();
  chart = null;
  const area = $('chart');
  area.replaceChildren();
  const total = $('usage-total');
  total.textContent = '';
  if (usage.error !== undefined) {
    message.textContent = usage.error.code === -32601 ? 'usage history is not available on this node' : usage.error.message;
    area.classList.add('empty-chart');
    return;
  }
  area.classList.remove('empty-chart');
  message.textContent = '';
  const hours = usage.result.hours;
  const x = hours.map((h) => Date.parse(h.at) / 1000);
  const requests = hours.map((h) => h.requests);
  const refusals = hours.map((h) => Object.values(h.refusals).reduce((a, b) => a + b, 0));
  const sum = (list: number[]): number => list.reduce((a, b) => a + b, 0);
  const whose = select.value === '' ? 'the node' : select.value;
  total.textContent =
    `${sum(requests)} requests` +
    (select.value === '' ? ` and ${sum(refusals)} refusals` : '') +
    ` for ${whose} in the last ${hours.length} hours, by the hour (UTC)`;
  chart = new uPlot(
    {
      width: Math.max(320, area.clientWidth || 900),
      height: 320,
      series: [
        {},
        { label: 'requests', stroke: '#3b6ef5', fill: 'rgba(59,110,245,0.12)', width: 2 },
        { label: 'refusals', stroke: '#d9434b', width: 2 },
      ],
      axes: [{}, { label: 'per hour' }],
    },
    [x, requests, refusals],
    area,
  );
}
$('usage-token').addEventListener('change', () => void loadUsage());

// ---- node

async function loadNode(): Promise<void> {
  const cards = $('node-cards');
  cards.replaceChildren();
  $('node-error').textContent = '';
  const card = (title: string, rows: [string, string][], tone = ''): void => {
    const div = el('div', null, { class: `card stat ${tone}` });
    div.append(el('h3', title));
    const dl = el('dl');
    for (const [k, v] of rows) dl.append(el('dt', k), el('dd', v));
    div.append(dl);
    cards.append(div);
  };
  try {
    const response = await fetch(HEALTH, { cache: 'no-store', credentials: 'omit' });
    const health = (await response.json()) as Record<string, unknown>;
    const rows: [string, string][] = [];
    const flat = (prefix: string, value: unknown): void => {
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
        const entries = Object.entries(value as Record<string, unknown>);
        // {"healthy": true} and the like say one word.
        if (entries.length === 1 && typeof entries[0][1] === 'boolean') {
          rows.push([prefix, `${entries[0][1] ? '' : 'not '}${entries[0][0]}`]);
          return;
        }
        for (const [k, v] of entries) flat(prefix === '' || prefix === 'checks' ? k : `${prefix}.${k}`, v);
        return;
      }
      rows.push([prefix, Array.isArray(value) ? value.join(', ') : String(value)]);
    };
    flat('', health);
    card('Upstream health', [['HTTP', String(response.status)], ...rows], response.ok ? 'good' : 'bad');
  } catch {
    card('Upstream health', [['state', 'unreachable']], 'bad');
  }
  const answer = await call<{ tokens: Token[] }>('auth.listTokens');
  if (answer.result !== undefined) {
    const all = answer.result.tokens;
    const live = all.filter((t) => !t.revoked);
    const last =
      all
        .map((t) => t.lastUsedAt)
        .filter((v): v is string => v !== null)
        .sort()
        .pop() ?? null;
    card('Tokens', [
      ['live', String(live.length)],
      ['revoked', String(all.length - live.length)],
      ['requests', String(totalRequests(all))],
      ['last used', time(last)],
    ]);
  } else {
    $('node-error').textContent = answer.error.message;
  }
  const status = await call<{ websocketSessions: number; upstream: { answers: number; p50Ms: number | null; p99Ms: number | null } }>(
    'auth.nodeStatus',
  );
  if (status.result !== undefined) {
    const ms = (v: number | null): string => (v === null ? '-' : `${v < 10 ? v.toFixed(2) : v.toFixed(0)} ms`);
    const { websocketSessions, upstream } = status.result;
    card('Traffic now', [
      ['WebSocket sessions', String(websocketSessions)],
      ['upstream answers', String(upstream.answers)],
      ['upstream p50', ms(upstream.p50Ms)],
      ['upstream p99', ms(upstream.p99Ms)],
    ]);
  }
  const day = await call<Usage>('auth.usageHistory', { hours: 24 });
  if (day.result !== undefined) {
    const totals = new Map<string, number>();
    for (const hour of day.result.hours) {
      for (const [reason, n] of Object.entries(hour.refusals)) totals.set(reason, (totals.get(reason) ?? 0) + n);
    }
    const refused = [...totals].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
    card(
      'Refusals, last 24 hours',
      refused.length === 0 ? [['none', '0']] : refused.map(([reason, n]) => [reason, String(n)]),
      refused.length === 0 ? 'good' : '',
    );
  }
  card('This session', [
    ['ends', new Date(sessionEnd).toLocaleString()],
    ['renewed', 'automatically, 5 min before its end'],
  ]);
}
$('node-refresh').addEventListener('click', () => void loadNode());

// ---- start: a session still open in this tab goes on; otherwise, sign in.

if (csrf === '') {
  signedOut();
} else {
  void rpc<{ csrf: string; expiresAt: string }>('auth.renewSession').then(
    (answer) => {
      if (answer.result === undefined) return signedOut();
      started(answer.result);
      enter();
    },
    () => signedOut(),
  );
}

// The operator console's shell: the header (venue, who is signed in, language, sign-out), the
// navigation the operator's role may use, and the hash router (#/board, #/booking/123, ...) that
// renders one page at a time into the main area.

import { api, onUnauthorized, session } from './api.js';
import { LANGS, lang, setLang, t } from './i18n.js';
import { errorBox, fill, h, toast } from './ui.js';
import * as login from './pages/login.js';
import * as board from './pages/board.js';
import * as bookings from './pages/bookings.js';
import * as booking from './pages/booking.js';
import * as approvals from './pages/approvals.js';
import * as catalog from './pages/catalog.js';
import * as resource from './pages/resource.js';
import * as policies from './pages/policies.js';
import * as users from './pages/users.js';
import * as operations from './pages/operations.js';

const DESK = ['staff', 'manager', 'admin'];
const CATALOG = ['manager', 'admin'];
const ADMIN = ['admin'];

// nav names the menu entry a route lights up; routes without title are reached from other pages.
const ROUTES = [
  { path: 'board', page: board, roles: DESK, nav: 'board', title: 'nav.board' },
  { path: 'bookings', page: bookings, roles: DESK, nav: 'bookings', title: 'nav.bookings' },
  { path: 'booking/:id', page: booking, roles: DESK, nav: 'bookings' },
  { path: 'approvals', page: approvals, roles: DESK, nav: 'approvals', title: 'nav.approvals' },
  { path: 'catalog', page: catalog, roles: CATALOG, nav: 'catalog', title: 'nav.catalog' },
  { path: 'catalog/resource/:id', page: resource, roles: CATALOG, nav: 'catalog' },
  { path: 'policies', page: policies, roles: ADMIN, nav: 'policies', title: 'nav.policies' },
  { path: 'users', page: users, roles: ADMIN, nav: 'users', title: 'nav.users' },
  { path: 'users/:id', page: users, roles: ADMIN, nav: 'users' },
  { path: 'operations', page: operations, roles: ADMIN, nav: 'operations', title: 'nav.operations' },
];

const VENUE_KEY = 'slotwheel.console.venue';
const OPERATOR_ROLES = new Set(DESK);

let venues = null; // GET /venues, loaded once per sign-in and reloaded after a venue changes
let renderCount = 0;

// One banner for the whole session, kept across renders: an action's "done" must survive the
// reload of the page that shows its result.
const banner = h('div', { class: 'toast', 'data-test': 'toast', role: 'status', hidden: true });
let keepBannerOnce = false;

/** {path, segments, query} of the location's hash. */
function parseHash() {
  const [path, qs] = (location.hash.replace(/^#\/?/, '') || '').split('?');
  return { segments: path.split('/').filter(Boolean), query: Object.fromEntries(new URLSearchParams(qs || '')) };
}

function matchRoute(segments) {
  for (const route of ROUTES) {
    const parts = route.path.split('/');
    if (parts.length !== segments.length) continue;
    const params = {};
    if (parts.every((p, i) => (p.startsWith(':') ? ((params[p.slice(1)] = decodeURIComponent(segments[i])), true) : p === segments[i]))) {
      return { route, params };
    }
  }
  return null;
}

/** Builds a hash link: link('bookings', {q: 'alice'}) → "#/bookings?q=alice". */
export function link(path, query = {}) {
  const qs = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== '' && v !== undefined && v !== null));
  return `#/${path}${qs.toString() ? `?${qs}` : ''}`;
}

/** Moves to a page; keepBanner keeps the banner's message (an action that ends on another page). */
export function go(path, query, { keepBanner = false } = {}) {
  keepBannerOnce = keepBanner;
  const hash = link(path, query);
  // The same hash fires no hashchange: render again, as a search repeated is meant to.
  if (location.hash === hash) render();
  else location.hash = hash;
}

async function loadVenues() {
  venues = (await api('GET', '/venues')).items || [];
  return venues;
}

/** The venue the console works on: the token's for staff and managers, the one picked for admins. */
function currentVenue(user) {
  if (user.role !== 'admin') {
    return venues?.find((v) => v.venue_id === user.venueId) || { venue_id: user.venueId, name: `#${user.venueId}`, timezone: 'Asia/Shanghai' };
  }
  if (!venues) return null;
  const picked = localStorage.getItem(VENUE_KEY);
  return venues.find((v) => v.venue_id === picked) || venues[0] || null;
}

function langSwitch() {
  return h(
    'select',
    { class: 'lang-switch', 'data-test': 'lang-switch', 'aria-label': t('header.language'), onchange: (e) => { setLang(e.target.value); render(); } },
    LANGS.map(([code, label]) => h('option', { value: code, selected: code === lang() }, label)),
  );
}

function venuePicker(user, venue) {
  if (user.role !== 'admin') return h('span', { class: 'venue-name', 'data-test': 'venue-name' }, venue ? venue.name : '');
  if (!venues?.length) return h('span', { class: 'venue-name muted' }, t('header.noVenue'));
  return h(
    'label',
    { class: 'venue-picker' },
    h('span', { class: 'sr-only' }, t('header.venue')),
    h(
      'select',
      { 'data-test': 'venue-picker', onchange: (e) => { localStorage.setItem(VENUE_KEY, e.target.value); render(); } },
      venues.map((v) => h('option', { value: v.venue_id, selected: venue && v.venue_id === venue.venue_id }, v.name)),
    ),
  );
}

function header(user, venue) {
  return h(
    'header',
    { class: 'topbar' },
    h('a', { class: 'brand', href: '#/board' }, h('span', { class: 'brand-mark' }, 'S'), h('span', {}, t('app.title'))),
    venuePicker(user, venue),
    h('span', { class: 'spacer' }),
    h('span', { class: 'who', 'data-test': 'who' }, h('span', { class: 'who-name' }, user.sub), h('span', { class: 'role-tag' }, t(`role.${user.role}`))),
    langSwitch(),
    h('button', { type: 'button', class: 'btn btn-ghost', 'data-test': 'sign-out', onclick: signOut }, t('header.signOut')),
  );
}

function nav(user, active) {
  const entries = ROUTES.filter((r) => r.title && r.roles.includes(user.role));
  return h(
    'nav',
    { class: 'sidenav', 'aria-label': t('header.menu') },
    entries.map((r) =>
      h('a', { href: `#/${r.path}`, class: r.nav === active ? 'active' : '', 'data-test': `nav-${r.nav}` }, h('span', { class: `nav-icon icon-${r.nav}`, 'aria-hidden': 'true' }), t(r.title)),
    ),
    user.role === 'admin' && h('a', { href: '/monitoring/', target: '_blank', rel: 'noopener', class: 'nav-external', 'data-test': 'nav-monitoring' }, t('nav.monitoring'), ' ↗'),
  );
}

function signOut() {
  session.signOut();
  venues = null;
  location.hash = '#/login';
}

/**
 * Renders the page the hash names; a newer render makes an older one's late results harmless.
 * Moving to another page clears the banner; reloading the same page (after an action) keeps it.
 */
async function render({ keepBanner = false } = {}) {
  const mine = ++renderCount;
  if (!keepBanner && !keepBannerOnce) banner.hidden = true;
  keepBannerOnce = false;
  document.documentElement.lang = lang();
  const app = document.getElementById('app');
  const { segments, query } = parseHash();
  const user = session.user();

  if (!user || !OPERATOR_ROLES.has(user.role) || segments[0] === 'login') {
    if (user && segments[0] === 'login') return go('board');
    document.title = `${t('login.title')} · ${t('app.title')}`;
    const next = segments[0] && segments[0] !== 'login' ? location.hash : '';
    fill(app, login.render({ next, onSignedIn: () => { venues = null; location.hash = next || '#/board'; render(); }, langSwitch }));
    return;
  }

  const matched = matchRoute(segments);
  if (!matched || !matched.route.roles.includes(user.role)) return go('board');
  const { route, params } = matched;

  const page = h('div', { class: 'page' });
  const main = h('main', { class: 'main' }, banner, page);
  let venuesFailed = null;
  try {
    if (!venues) await loadVenues();
  } catch (err) {
    venuesFailed = err; // venues stays null: the next render tries again
  }
  if (mine !== renderCount) return;
  const venue = currentVenue(user);
  fill(app, header(user, venue), h('div', { class: 'layout' }, nav(user, route.nav), main));
  if (venuesFailed) toast(venuesFailed.message, 'error');
  document.title = `${t(route.title || ROUTES.find((r) => r.nav === route.nav).title)} · ${t('app.title')}`;

  const ctx = {
    user,
    venue,
    venues: venues || [],
    params,
    query,
    root: page,
    link,
    go,
    /** Renders the page again, e.g. after an action; venuesChanged reloads the venue list first. */
    reload: async (venuesChanged = false) => {
      if (venuesChanged) await loadVenues();
      return render({ keepBanner: true });
    },
    isCurrent: () => mine === renderCount,
  };
  try {
    await route.page.render(ctx);
  } catch (err) {
    if (!('status' in err)) throw err;
    if (mine === renderCount) page.append(errorBox(err));
  }
}

onUnauthorized(() => {
  if (!session.token()) return;
  session.signOut();
  venues = null;
  sessionStorage.setItem('slotwheel.console.expired', '1');
  render();
});

window.addEventListener('hashchange', render);
render();

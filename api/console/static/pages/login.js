// 登录 Login: paste a token (slotwheel token --role admin --sub ops), or — when the server has dev
// log-in on — ask one for a user id, role and venue. The token stays in sessionStorage.

import { api, decodeJwt, session } from '../api.js';
import { t } from '../i18n.js';
import { field, fill, formError, h, input, select, showError, submitButton, submitForm } from '../ui.js';

const OPERATOR_ROLES = ['staff', 'manager', 'admin'];
const EXPIRED_KEY = 'slotwheel.console.expired';

/** The reason a pasted token cannot be used, or '' when it can. */
function tokenProblem(token) {
  const claims = decodeJwt(token);
  if (!claims) return t('login.notAToken');
  if (claims.exp && claims.exp * 1000 < Date.now()) return t('login.expired');
  if (!OPERATOR_ROLES.includes(claims.role)) return t('login.notOperator', { role: claims.role || '?' });
  return '';
}

function pasteForm(onSignedIn) {
  const area = h('textarea', { name: 'token', rows: 4, 'data-test': 'login-token', placeholder: 'eyJhbGciOi…', spellcheck: 'false', required: true });
  const form = h(
    'form',
    { class: 'form', 'data-test': 'login-token-form' },
    formError(),
    field(t('login.token'), area, 'token', t('login.tokenHint')),
    h('div', { class: 'form-actions' }, submitButton(t('login.signIn'), 'login-token-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const problem = tokenProblem(area.value);
    if (problem) return showError(form, { field: 'token', message: problem });
    session.signIn(area.value);
    onSignedIn();
  });
  return form;
}

function devForm(onSignedIn, venues) {
  const role = select('role', OPERATOR_ROLES.map((r) => [r, t(`role.${r}`)]), 'staff', { 'data-test': 'login-role' });
  const venue = select('venue_id', venues.map((v) => [v.venue_id, `${v.name} (#${v.venue_id})`]), venues[0]?.venue_id, { 'data-test': 'login-venue' });
  const venueField = field(t('login.venue'), venue, 'venue_id');
  const showVenue = () => (venueField.hidden = role.value === 'admin');
  role.addEventListener('change', showVenue);
  showVenue();
  const form = h(
    'form',
    { class: 'form', 'data-test': 'login-dev-form' },
    formError(),
    field(t('login.userId'), input('user_id', { required: true, value: 'desk', 'data-test': 'login-user', autocomplete: 'username' }), 'user_id'),
    field(t('login.role'), role, 'role'),
    venueField,
    h('div', { class: 'form-actions' }, submitButton(t('login.devSignIn'), 'login-dev-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = { user_id: form.user_id.value.trim(), role: role.value };
    if (role.value !== 'admin') body.venue_id = venue.value;
    submitForm(form, async () => {
      const { token } = await api('POST', '/auth/dev-login', { body });
      session.signIn(token);
      onSignedIn();
    });
  });
  return form;
}

/**
 * Dev log-in answers 404 when it is off; an empty body is refused (400) without creating anything
 * when it is on, so that probe tells which without a side effect.
 */
async function devLoginEnabled() {
  try {
    await api('POST', '/auth/dev-login', { body: {} });
    return true;
  } catch (err) {
    return err.status !== 404;
  }
}

async function fillDev(slot, onSignedIn) {
  if (!(await devLoginEnabled())) {
    fill(slot, h('p', { class: 'muted' }, t('login.devOff')));
    return;
  }
  let venues = [];
  try {
    venues = (await api('GET', '/venues')).items || [];
  } catch {
    // Without the list an admin can still sign in; staff and managers then see no venue to pick.
  }
  fill(slot, devForm(onSignedIn, venues));
}

export function render({ onSignedIn, langSwitch }) {
  const devSlot = h('div', { class: 'muted' }, t('common.loading'));
  const expired = sessionStorage.getItem(EXPIRED_KEY);
  sessionStorage.removeItem(EXPIRED_KEY);
  fillDev(devSlot, onSignedIn);
  return h(
    'div',
    { class: 'login-page' },
    h('div', { class: 'login-top' }, h('span', { class: 'brand' }, h('span', { class: 'brand-mark' }, 'S'), t('app.title')), langSwitch()),
    h(
      'div',
      { class: 'login-cards' },
      h('h1', {}, t('login.title')),
      expired && h('div', { class: 'box box-warn', 'data-test': 'toast' }, t('login.sessionEnded')),
      h('section', { class: 'card' }, h('h2', { class: 'card-title' }, t('login.pasteTitle')), pasteForm(onSignedIn)),
      h('section', { class: 'card' }, h('h2', { class: 'card-title' }, t('login.devTitle')), devSlot),
    ),
  );
}

// 场地与资源 Catalog: venues (create, rename, release mode), the current venue's resources (list,
// create; each opens its own page for details, hours and booking rules) and services (create with
// buffers, edit, disable). Managers see their own venue; only admins create venues.

import { api, listAll, newAction } from '../api.js';
import { has, t } from '../i18n.js';
import { card, centsToYuan, field, fieldError, fill, formError, h, input, money, num, select, submitButton, submitForm, toast, yuanToCents } from '../ui.js';
import { namesById, noVenue, venueResources } from '../venue.js';

const RELEASE_MODES = ['on', 'off', 'dry_run'];

/** A collapsible "+ New …" form, closed until the operator asks for it. */
function disclosure(label, test, body) {
  return h('details', { class: 'disclosure' }, h('summary', { class: 'btn', 'data-test': test }, label), body);
}

function statusTag(status) {
  return h('span', { class: `badge ${status === 'active' ? 'badge-ok' : 'badge-muted'}` }, has(`resource.status.${status}`) ? t(`resource.status.${status}`) : status);
}

// ---- venues ----

function releaseModeForm(v, ctx) {
  const form = h(
    'form',
    { class: 'inline-form', 'data-test': 'release-mode-form', 'data-id': v.venue_id },
    field(t('catalog.releaseMode'), select('mode', RELEASE_MODES.map((m) => [m, t(`releaseMode.${m}`)]), v.release_mode, { 'data-test': 'release-mode' }), 'mode'),
    submitButton(t('common.save'), 'release-mode-submit'),
    formError(),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitForm(form, async () => {
      await api('PUT', `/admin/venues/${v.venue_id}/release-mode`, { body: { mode: form.mode.value } });
      toast(t('catalog.releaseModeSaved', { mode: t(`releaseMode.${form.mode.value}`) }));
      await ctx.reload(true);
    });
  });
  return form;
}

function renameForm(v, ctx) {
  const form = h(
    'form',
    { class: 'inline-form', 'data-test': 'venue-rename-form' },
    field(t('catalog.name'), input('name', { value: v.name, required: true }), 'name'),
    submitButton(t('catalog.rename'), 'venue-rename-submit'),
    formError(),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitForm(form, async () => {
      await api('PATCH', `/admin/venues/${v.venue_id}`, { body: { name: form.name.value.trim() } });
      toast(t('common.saved'));
      await ctx.reload(true);
    });
  });
  return form;
}

function createVenueForm(ctx) {
  const action = newAction();
  const form = h(
    'form',
    { class: 'form form-grid', 'data-test': 'venue-create-form' },
    formError(),
    field(t('catalog.name'), input('name', { required: true }), 'name'),
    field(t('catalog.timezone'), input('timezone', { value: 'Asia/Shanghai', required: true }), 'timezone', t('catalog.timezoneHint')),
    h('div', { class: 'form-actions' }, submitButton(t('catalog.createVenue'), 'venue-create-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitForm(form, async () => {
      const v = await api('POST', '/admin/venues', { body: { name: form.name.value.trim(), timezone: form.timezone.value.trim() }, action });
      localStorage.setItem('slotwheel.console.venue', v.venue_id);
      toast(t('catalog.venueCreated', { name: v.name }));
      await ctx.reload(true);
    });
  });
  return form;
}

function venuesCard(ctx) {
  const isAdmin = ctx.user.role === 'admin';
  const shown = isAdmin ? ctx.venues : ctx.venues.filter((v) => v.venue_id === ctx.user.venueId);
  return card(
    t('catalog.venues'),
    h(
      'div',
      { class: 'venue-list' },
      shown.map((v) =>
        h(
          'div',
          { class: `venue-item${ctx.venue && v.venue_id === ctx.venue.venue_id ? ' current' : ''}`, 'data-test': 'venue-row', 'data-id': v.venue_id },
          h('div', { class: 'venue-head' }, h('strong', {}, v.name), h('span', { class: 'muted' }, ` #${v.venue_id} · ${v.timezone}`)),
          h('div', { class: 'venue-forms' }, renameForm(v, ctx), releaseModeForm(v, ctx)),
        ),
      ),
    ),
    h('p', { class: 'hint' }, t('catalog.releaseModeHint')),
    isAdmin && disclosure(t('catalog.newVenue'), 'venue-create-open', createVenueForm(ctx)),
  );
}

// ---- resources ----

function createResourceForm(ctx) {
  const action = newAction();
  const form = h(
    'form',
    { class: 'form form-grid', 'data-test': 'resource-create-form' },
    formError(),
    field(t('catalog.name'), input('name', { required: true }), 'name'),
    field(t('resource.kind'), input('kind', { required: true, placeholder: 'court / desk / room' }), 'kind', t('resource.kindHint')),
    field(t('resource.category'), input('category', {}), 'category', t('resource.categoryHint')),
    field(t('resource.capacity'), input('capacity', { type: 'number', min: 1, value: 1, required: true }), 'capacity', t('resource.capacityHint')),
    field(t('resource.price'), input('price', { inputmode: 'decimal', value: '0.00', required: true }), 'price_cents', t('resource.priceHint')),
    h('div', { class: 'form-actions' }, submitButton(t('catalog.createResource'), 'resource-create-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = {
      venue_id: ctx.venue.venue_id,
      name: form.name.value.trim(),
      kind: form.kind.value.trim(),
      category: form.category.value.trim(),
      capacity: num(form.capacity.value),
      price_cents: yuanToCents(form.price.value),
    };
    submitForm(form, async () => {
      const r = await api('POST', '/admin/resources', { body, action });
      toast(t('catalog.resourceCreated', { name: r.name }));
      ctx.go(`catalog/resource/${r.resource_id}`, {}, { keepBanner: true });
    });
  });
  return form;
}

function resourcesCard(ctx, resources) {
  const cols = ['name', 'kind', 'category', 'capacity', 'price', 'slot', 'status', ''];
  return card(
    t('catalog.resources'),
    resources.length
      ? h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'table table-hover', 'data-test': 'resources-table' },
            h('thead', {}, h('tr', {}, cols.map((c) => h('th', { class: ['capacity', 'price', 'slot'].includes(c) ? 'num' : null }, c && t(`catalog.col.${c}`))))),
            h(
              'tbody',
              {},
              resources.map((r) =>
                h(
                  'tr',
                  { 'data-test': 'resource-row', 'data-id': r.resource_id },
                  h('td', {}, h('a', { href: `#/catalog/resource/${r.resource_id}` }, r.name)),
                  h('td', {}, r.kind),
                  h('td', {}, r.category || '—'),
                  h('td', { class: 'num' }, r.capacity),
                  h('td', { class: 'num' }, money(r.price_cents)),
                  h('td', { class: 'num' }, r.slot_minutes ? t('common.minutes', { n: r.slot_minutes }) : t('catalog.noSchedule')),
                  h('td', {}, statusTag(r.status)),
                  h('td', {}, h('a', { class: 'btn btn-small', href: `#/catalog/resource/${r.resource_id}`, 'data-test': 'resource-manage' }, t('catalog.manage'))),
                ),
              ),
            ),
          ),
        )
      : h('div', { class: 'empty' }, t('board.noResources')),
    disclosure(t('catalog.newResource'), 'resource-create-open', createResourceForm(ctx)),
  );
}

// ---- services ----

function resourceChecks(resources, checked = []) {
  return h(
    'div',
    { class: 'checks' },
    resources.map((r) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'resource_ids', value: r.resource_id, checked: checked.includes(r.resource_id) }), r.name)),
  );
}

function createServiceForm(ctx, resources) {
  const action = newAction();
  const form = h(
    'form',
    { class: 'form form-grid', 'data-test': 'service-create-form' },
    formError(),
    field(t('catalog.name'), input('name', { required: true }), 'name'),
    field(t('service.duration'), input('duration_minutes', { type: 'number', min: 1, required: true, value: 60 }), 'duration_minutes', t('service.durationHint')),
    field(t('service.prep'), input('prep_minutes', { type: 'number', min: 0, value: 0 }), 'prep_minutes', t('service.prepHint')),
    field(t('service.cleanup'), input('cleanup_minutes', { type: 'number', min: 0, value: 0 }), 'cleanup_minutes', t('service.cleanupHint')),
    field(t('resource.price'), input('price', { inputmode: 'decimal', value: '0.00', required: true }), 'price_cents'),
    h('div', { class: 'field field-wide' }, h('span', { class: 'field-label' }, t('service.resources')), resourceChecks(resources), h('span', { class: 'field-hint' }, t('service.resourcesHint')), fieldError('resource_ids')),
    h('div', { class: 'form-actions' }, submitButton(t('catalog.createService'), 'service-create-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = {
      venue_id: ctx.venue.venue_id,
      name: form.name.value.trim(),
      duration_minutes: num(form.duration_minutes.value),
      prep_minutes: num(form.prep_minutes.value || '0'),
      cleanup_minutes: num(form.cleanup_minutes.value || '0'),
      resource_ids: [...form.querySelectorAll('input[name=resource_ids]:checked')].map((i) => i.value),
      price_cents: yuanToCents(form.price.value),
    };
    submitForm(form, async () => {
      const s = await api('POST', '/admin/services', { body, action });
      toast(t('catalog.serviceCreated', { name: s.name }));
      await ctx.reload();
    });
  });
  return form;
}

/** Name, price and status of a service (PATCH): what can change once guests may have booked it. */
function editServiceForm(s, ctx) {
  const active = (s.status || 'active') === 'active';
  const form = h(
    'form',
    { class: 'form form-grid', 'data-test': 'service-edit-form', 'data-id': s.service_id },
    formError(),
    field(t('catalog.name'), input('name', { value: s.name, required: true }), 'name'),
    field(t('resource.price'), input('price', { inputmode: 'decimal', value: centsToYuan(s.price_cents) }), 'price_cents'),
    field(t('catalog.col.status'), select('status', [['active', t('resource.status.active')], ['disabled', t('resource.status.disabled')]], active ? 'active' : 'disabled'), 'status', t('service.statusHint')),
    h('div', { class: 'form-actions' }, submitButton(t('common.save'), 'service-edit-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = { name: form.name.value.trim(), price_cents: yuanToCents(form.price.value), status: form.status.value };
    submitForm(form, async () => {
      await api('PATCH', `/admin/services/${s.service_id}`, { body });
      toast(t('common.saved'));
      await ctx.reload();
    });
  });
  return form;
}

function servicesCard(ctx, services, resources) {
  const names = namesById(resources);
  const cols = ['name', 'duration', 'buffers', 'resources', 'price', 'status'];
  const list = services.length
    ? h(
        'div',
        { class: 'service-list' },
        services.map((s) =>
          h(
            'div',
            { class: 'service-item', 'data-test': 'service-row', 'data-id': s.service_id },
            h(
              'dl',
              { class: 'service-facts' },
              cols.flatMap((c) => [h('dt', {}, t(`service.col.${c}`)), h('dd', {}, serviceFact(c, s, names))]),
            ),
            disclosure(t('common.edit'), 'service-edit-open', editServiceForm(s, ctx)),
          ),
        ),
      )
    : h('div', { class: 'empty' }, t('catalog.noServices'));
  return card(t('catalog.services'), h('p', { class: 'hint' }, t('catalog.servicesHint')), list, disclosure(t('catalog.newService'), 'service-create-open', createServiceForm(ctx, resources)));
}

function serviceFact(col, s, names) {
  switch (col) {
    case 'name':
      return h('strong', {}, s.name);
    case 'duration':
      return t('common.minutes', { n: s.duration_minutes });
    case 'buffers':
      return t('service.buffers', { prep: s.prep_minutes, cleanup: s.cleanup_minutes });
    case 'resources':
      return s.roles ? s.roles.map((r) => `${r.role}: ${r.resource_ids.map((id) => names.get(id) || `#${id}`).join('/')}`).join('; ') : s.resource_ids.map((id) => names.get(id) || `#${id}`).join(', ');
    case 'price':
      return money(s.price_cents);
    default:
      return statusTag(s.status || 'active');
  }
}

export async function render(ctx) {
  const { root, venue } = ctx;
  root.append(h('h1', {}, t('nav.catalog')));
  const venues = venuesCard(ctx);
  if (!venue) return root.append(venues, noVenue());
  const body = h('div', { class: 'muted' }, t('common.loading'));
  root.append(venues, body);
  const [resources, services] = await Promise.all([venueResources(venue.venue_id), listAll('/services', { venue_id: venue.venue_id })]);
  if (!ctx.isCurrent()) return;
  body.className = '';
  fill(body, h('h2', { class: 'section-title' }, t('catalog.ofVenue', { name: venue.name })), resourcesCard(ctx, resources), servicesCard(ctx, services, resources));
}

// 运维 Operations (admin): what needs an operator's eye — releases due soon and overdue, retrying
// and dead-letter (archived) tasks with a re-drive button, failed refunds, failed webhook
// deliveries with a retry button, capacity-ledger alerts — and the way to the Asynq dashboard.

import { api, listAll, newAction } from '../api.js';
import { has, t } from '../i18n.js';
import { card, dateTime, empty, instant, errorBox, errorMessage, fill, h, hm, money, statusBadge, toast, zonedDateTime } from '../ui.js';
import { namesById, venueResources } from '../venue.js';

const bookingLink = (id) => (id ? h('a', { href: `#/booking/${id}`, 'data-test': 'booking-link' }, `#${id}`) : '—');

function table(cols, rows, test) {
  return h(
    'div',
    { class: 'table-wrap' },
    h('table', { class: 'table', 'data-test': test }, h('thead', {}, h('tr', {}, cols.map((c) => h('th', {}, c)))), h('tbody', {}, rows)),
  );
}

/**
 * A button that runs one POST (its own idempotency key across retries) and then shows the result;
 * errors go to the banner, since the row has no form.
 */
function actionButton(label, test, run) {
  const action = newAction();
  const btn = h('button', { type: 'button', class: 'btn btn-small btn-primary', 'data-test': test }, label);
  btn.addEventListener('click', async () => {
    btn.disabled = true;
    try {
      await run(action);
    } catch (err) {
      if (!('status' in err)) throw err;
      toast(errorMessage(err), 'error');
    } finally {
      btn.disabled = false;
    }
  });
  return btn;
}

/** Loads one section; a route the server lacks becomes a "not available" box, not a broken page. */
async function section(title, test, load) {
  const body = h('div', { class: 'muted' }, t('common.loading'));
  const el = card(title, body);
  el.dataset.test = test;
  try {
    const content = await load();
    body.className = '';
    fill(body, content);
  } catch (err) {
    if (!('status' in err)) throw err;
    fill(body, errorBox(err));
  }
  return el;
}

// ---- the overview (GET /admin/operations) ----

function stat(label, value, test, warn) {
  return h('div', { class: `stat${warn && value > 0 ? ' stat-warn' : ''}`, 'data-test': test }, h('div', { class: 'stat-value' }, String(value)), h('div', { class: 'stat-label' }, label));
}

function releaseTable(bookings, names, test) {
  if (!bookings.length) return empty(t('ops.noneDue'));
  return table(
    [t('bookings.col.id'), t('bookings.col.status'), t('bookings.col.resource'), t('bookings.col.time'), t('booking.releaseAt'), t('bookings.col.user')],
    bookings.map((b) =>
      h(
        'tr',
        { 'data-test': 'release-row' },
        h('td', {}, bookingLink(b.booking_id)),
        h('td', {}, statusBadge(b.status)),
        h('td', {}, names.get(b.resource_id) || `#${b.resource_id}`),
        h('td', { class: 'nowrap' }, `${dateTime(b.start)}–${hm(b.end)}`),
        h('td', { class: 'nowrap' }, instant(b.release_at)),
        h('td', {}, b.user_id || '—'),
      ),
    ),
    test,
  );
}

const QUEUE_COLUMNS = ['pending', 'active', 'scheduled', 'retry', 'archived', 'completed'];

function queuesTable(queues) {
  if (!queues.length) return empty(t('ops.noQueues'));
  return table(
    [t('ops.q.queue'), ...QUEUE_COLUMNS.map((c) => t(`ops.q.${c}`))],
    queues.map((q) => h('tr', {}, h('td', { class: 'mono' }, q.queue), QUEUE_COLUMNS.map((c) => h('td', { class: `num${(c === 'retry' || c === 'archived') && q[c] > 0 ? ' error-text' : ''}` }, q[c] ?? '—')))),
    'queues',
  );
}

/**
 * The capacity ledger's alerts: slots holding more than their capacity (Redis and MySQL disagreed),
 * and payments the ledger refused because the units were already sold (refunded).
 */
function ledgerAlerts(o, names, tz) {
  const over = o.slots_over_capacity || [];
  const refused = o.refunds_capacity_refused || [];
  if (!over.length && !refused.length) return empty(t('ops.noAlerts'));
  return h(
    'ul',
    { class: 'alerts', 'data-test': 'ledger-alerts' },
    over.map((a) => h('li', {}, t('ops.overCapacity', { resource: names.get(a.resource_id) || `#${a.resource_id}`, start: zonedDateTime(a.start, tz), end: zonedDateTime(a.end, tz).slice(11), occupied: a.occupied, capacity: a.capacity }))),
    refused.map((r) => h('li', {}, t('ops.refused', { refund: r.refund_id, amount: money(r.amount_cents), status: t(`refundStatus.${r.status}`) }))),
  );
}

async function overview(ctx) {
  const venueId = ctx.venue?.venue_id;
  const [o, resources] = await Promise.all([api('GET', '/admin/operations', { query: { venue_id: venueId } }), venueId ? venueResources(venueId) : []]);
  const names = namesById(resources);
  const tz = ctx.venue?.timezone;
  const alerts = (o.slots_over_capacity || []).length + (o.refunds_capacity_refused || []).length;
  return [
    h('p', { class: 'hint' }, t('ops.asOf', { now: zonedDateTime(o.now, tz) })),
    h(
      'div',
      { class: 'stats' },
      stat(t('ops.overdue'), o.releases_overdue.length, 'stat-overdue', true),
      stat(t('ops.dueSoon'), o.releases_due_soon.length, 'stat-due-soon'),
      stat(t('ops.failedRefunds'), o.failed_refunds, 'stat-failed-refunds', true),
      stat(t('ops.failedDeliveries'), o.failed_deliveries, 'stat-failed-deliveries', true),
      stat(t('ops.ledgerAlerts'), alerts, 'stat-ledger-alerts', true),
    ),
    h('h3', {}, t('ops.overdue')),
    h('p', { class: 'hint' }, t('ops.overdueHint')),
    releaseTable(o.releases_overdue, names, 'releases-overdue'),
    h('h3', {}, t('ops.dueSoon')),
    releaseTable(o.releases_due_soon, names, 'releases-due-soon'),
    h('h3', {}, t('ops.ledgerAlerts')),
    ledgerAlerts(o, names, tz),
    h('h3', {}, t('ops.queues')),
    queuesTable(o.queues || []),
  ];
}

// ---- tasks (GET /admin/tasks, POST /admin/tasks/{queue}/{task_id}/redrive) ----

function tasksTable(items, ctx) {
  if (!items.length) return empty(t('ops.noTasks'));
  const when = (iso) => zonedDateTime(iso, ctx.venue?.timezone);
  return table(
    ['type', 'booking', 'releaseAt', 'retried', 'lastError', 'next', ''].map((c) => c && t(`ops.task.${c}`)),
    items.map((task) =>
      h(
        'tr',
        { 'data-test': 'task-row', 'data-id': task.task_id, 'data-state': task.state },
        h('td', {}, h('div', { class: 'mono' }, task.type), h('div', { class: 'muted small' }, `${task.queue} · ${task.task_id}`)),
        h('td', {}, task.booking_id ? bookingLink(task.booking_id) : task.subject || '—'),
        h('td', { class: 'nowrap' }, task.release_at ? when(task.release_at) : '—'),
        h('td', { class: 'num' }, `${task.retried}/${task.max_retry}`),
        h('td', { class: 'error-text' }, task.last_error || '—', task.last_failed_at && h('div', { class: 'muted small' }, when(task.last_failed_at))),
        h('td', { class: 'nowrap' }, task.next_process_at ? when(task.next_process_at) : '—'),
        h(
          'td',
          {},
          actionButton(t('ops.redrive'), 'redrive', async (action) => {
            const res = await api('POST', `/admin/tasks/${encodeURIComponent(task.queue)}/${encodeURIComponent(task.task_id)}/redrive`, { body: {}, action });
            if (res.done) toast(t('ops.redriven', { outcome: res.outcome ? outcomeText(res.outcome) : t('ops.outcomeDone') }));
            else toast(t('ops.redriveFailed', { error: res.error || '—' }), 'error');
            await ctx.reload();
          }),
        ),
      ),
    ),
    'tasks',
  );
}

function outcomeText(outcome) {
  return has(`ops.outcome.${outcome}`) ? t(`ops.outcome.${outcome}`) : outcome;
}

async function tasks(ctx) {
  const [retry, archived] = await Promise.all(['retry', 'archived'].map((state) => api('GET', '/admin/tasks', { query: { state, limit: 100 } }).then((d) => d.items || [])));
  return [h('h3', {}, t('ops.retrying')), tasksTable(retry, ctx), h('h3', {}, t('ops.archived')), h('p', { class: 'hint' }, t('ops.archivedHint')), tasksTable(archived, ctx)];
}

// ---- money and webhooks ----

async function failedRefunds() {
  const items = await listAll('/admin/refunds', { status: 'failed' }, 5);
  if (!items.length) return empty(t('ops.noFailedRefunds'));
  return table(
    ['refund', 'booking', 'amount', 'reason', 'updated'].map((c) => t(`ops.refund.${c}`)),
    items.map((r) =>
      h('tr', { 'data-test': 'refund-row' }, h('td', { class: 'mono' }, r.refund_id), h('td', {}, bookingLink(r.booking_id)), h('td', { class: 'num' }, money(r.amount_cents)), h('td', {}, t(`refundReason.${r.reason}`)), h('td', {}, dateTime(r.updated_at))),
    ),
    'failed-refunds',
  );
}

async function failedDeliveries(ctx) {
  const hooks = await listAll('/admin/webhooks', {}, 5);
  if (!hooks.length) return empty(t('ops.noWebhooks'));
  const perHook = await Promise.all(hooks.map(async (w) => ({ w, items: await listAll(`/admin/webhooks/${w.webhook_id}/deliveries`, { status: 'failed' }, 5) })));
  const rows = perHook.flatMap(({ w, items }) =>
    items.map((d) =>
      h(
        'tr',
        { 'data-test': 'delivery-row' },
        h('td', { class: 'small' }, w.url),
        h('td', { class: 'mono' }, d.event_type),
        h('td', {}, subjectLink(d.subject)),
        h('td', { class: 'num' }, d.attempts),
        h('td', { class: 'error-text' }, d.last_status ? `HTTP ${d.last_status} ` : '', d.last_error),
        h(
          'td',
          {},
          actionButton(t('ops.retry'), 'delivery-retry', async (action) => {
            await api('POST', `/admin/webhooks/${w.webhook_id}/deliveries/${d.delivery_id}/retry`, { body: {}, action });
            toast(t('ops.retried'));
            await ctx.reload();
          }),
        ),
      ),
    ),
  );
  if (!rows.length) return empty(t('ops.noFailedDeliveries'));
  return table(['endpoint', 'event', 'subject', 'attempts', 'error', ''].map((c) => c && t(`ops.delivery.${c}`)), rows, 'failed-deliveries');
}

/** booking:42 → a link to the booking; other subjects as they are. */
function subjectLink(subject) {
  const m = /^booking:(\d+)$/.exec(subject || '');
  return m ? bookingLink(m[1]) : subject;
}

export async function render(ctx) {
  const { root, venue } = ctx;
  root.append(
    h('h1', {}, t('nav.operations')),
    h('div', { class: 'box box-info' }, t('ops.dashboardHint'), ' ', h('a', { href: '/monitoring/', target: '_blank', rel: 'noopener', 'data-test': 'monitoring-link', class: 'btn btn-small' }, t('nav.monitoring'), ' ↗')),
  );
  const sections = await Promise.all([
    section(venue ? t('ops.overviewOf', { name: venue.name }) : t('ops.overview'), 'ops-overview', () => overview(ctx)),
    section(t('ops.tasks'), 'ops-tasks', () => tasks(ctx)),
    section(t('ops.failedRefunds'), 'ops-refunds', failedRefunds),
    section(t('ops.failedDeliveries'), 'ops-deliveries', () => failedDeliveries(ctx)),
  ]);
  if (ctx.isCurrent()) root.append(...sections);
}

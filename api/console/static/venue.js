// The current venue's data as the desk pages read it: its resources and its bookings.

import { api, listAll } from './api.js';
import { t } from './i18n.js';
import { addDays, h } from './ui.js';

export async function venueResources(venueId) {
  return listAll('/resources', { venue_id: venueId });
}

/** resource_id → name, for showing bookings. */
export function namesById(resources) {
  return new Map(resources.map((r) => [r.resource_id, r.name]));
}

/**
 * Every booking of the venue starting on date and the days-1 after it. A server without the days
 * parameter refuses it naming the field; then each day is asked for on its own.
 */
export async function venueBookings(venueId, date, days = 1, filters = {}) {
  const query = { venue_id: venueId, date, ...filters };
  if (days === 1) return listAll('/admin/bookings', query);
  try {
    return await listAll('/admin/bookings', { ...query, days });
  } catch (err) {
    if (err.field !== 'days') throw err;
    const dates = Array.from({ length: days }, (_, i) => addDays(date, i));
    return (await Promise.all(dates.map((d) => listAll('/admin/bookings', { ...query, date: d })))).flat();
  }
}

/** The box a venue page shows when there is no venue to work on (an admin before any is created). */
export function noVenue() {
  return h('div', { class: 'box box-muted', 'data-test': 'no-venue' }, t('common.noVenue'));
}

/** The availability of one resource on one date, or null when it cannot be had (shown as unknown). */
export async function dayAvailability(resourceId, date) {
  try {
    return (await api('GET', '/availability', { query: { resource_id: resourceId, date } })).slots || [];
  } catch {
    return null;
  }
}

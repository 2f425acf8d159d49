package booking

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Field names a request field whose value has limits. The names are the API's JSON field names, so
// that an error can blame the field the client sent.
type Field string

// The fields with numeric limits.
const (
	FieldQuantity        Field = "quantity"
	FieldCapacity        Field = "capacity"
	FieldPriceCents      Field = "price_cents"
	FieldAmountCents     Field = "amount_cents"
	FieldSlotMinutes     Field = "slot_minutes"
	FieldHorizonDays     Field = "horizon_days"
	FieldDurationMinutes Field = "duration_minutes"
	FieldPrepMinutes     Field = "prep_minutes"
	FieldCleanupMinutes  Field = "cleanup_minutes"
	FieldGraceSeconds    Field = "grace_seconds"
	FieldLimit           Field = "limit"
	FieldMinNotice       Field = "min_notice_minutes"
	FieldMaxDaysAhead    Field = "max_days_ahead"
	FieldCancelCutoff    Field = "cancel_cutoff_minutes"
	FieldCancelRefund    Field = "cancel_refund_percent"
	FieldLateRefund      Field = "late_cancel_refund_percent"
	FieldNoshowRefund    Field = "noshow_refund_percent"
	FieldRescheduleCut   Field = "reschedule_cutoff_minutes"
	FieldMaxReschedules  Field = "max_reschedules"
	FieldMaxNoshows      Field = "max_noshows"
	FieldWithinDays      Field = "within_days"
	FieldFreezeDays      Field = "freeze_days"
	FieldApprovalWindow  Field = "approval_window_minutes"
	FieldDays            Field = "days"
)

type limit struct {
	code     string
	min, max int64
}

// limits is the one table of numeric bounds; the API checks only that a number is a number.
var limits = map[Field]limit{
	FieldQuantity:        {"invalid_quantity", 1, 1000},
	FieldCapacity:        {"invalid_capacity", 1, 1_000_000},
	FieldPriceCents:      {"invalid_price", 0, 10_000_000_000},
	FieldAmountCents:     {"invalid_amount", 0, 10_000_000_000},
	FieldSlotMinutes:     {"invalid_slot_minutes", 1, 1440},
	FieldHorizonDays:     {"invalid_horizon_days", 1, 366},
	FieldDurationMinutes: {"invalid_duration", 1, 1440},
	FieldPrepMinutes:     {"invalid_buffer", 0, 720},
	FieldCleanupMinutes:  {"invalid_buffer", 0, 720},
	FieldGraceSeconds:    {"invalid_grace", 0, 86400},
	FieldLimit:           {"invalid_limit", 1, 100},
	FieldDays:            {"invalid_days", 1, 7}, // a list of consecutive days: at most a week
	FieldMinNotice:       {"invalid_policy", 0, 366 * 1440},
	FieldMaxDaysAhead:    {"invalid_policy", 0, 366}, // 0: the schedule's horizon
	FieldCancelCutoff:    {"invalid_policy", 0, 366 * 1440},
	FieldCancelRefund:    {"invalid_policy", 0, 100},
	FieldLateRefund:      {"invalid_policy", 0, 100},
	FieldNoshowRefund:    {"invalid_policy", 0, 100},
	FieldRescheduleCut:   {"invalid_policy", 0, 366 * 1440},
	FieldMaxReschedules:  {"invalid_policy", 0, 100},
	FieldMaxNoshows:      {"invalid_policy", 0, 1000}, // 0: the freeze is off
	FieldWithinDays:      {"invalid_policy", 1, 3650},
	FieldFreezeDays:      {"invalid_policy", 1, 3650},
	FieldApprovalWindow:  {"invalid_policy", 1, 30 * 1440},
}

// Defaults of optional fields.
const (
	DefaultHorizonDays = 30
	DefaultPageSize    = 20
	DefaultQuantity    = 1
)

// Lengths of free-text and token fields.
const (
	MaxNameLen        = 200 // venue, resource and service names (characters)
	MaxTagLen         = 64  // kind, category, role (characters)
	MaxTimezoneLen    = 64
	MaxCheckinCodeLen = 16
	MaxPaymentIDLen   = 128
	MaxCursorLen      = 256
)

// CheckRange checks a number against its field's bounds.
func CheckRange(f Field, v int64) error {
	l, ok := limits[f]
	if !ok {
		panic("booking: no limits for field " + string(f))
	}
	if v < l.min || v > l.max {
		return Invalid(l.code, "%s must be between %d and %d", f, l.min, l.max).WithField(string(f))
	}
	return nil
}

// CodeFor is the error code of a number that does not fit field (a dotted JSON path such as
// "peak.grace_seconds"): the field's own code when it has limits, else "invalid_number".
func CodeFor(field string) string {
	last := field
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		last = field[i+1:]
	}
	if l, ok := limits[Field(last)]; ok {
		return l.code
	}
	return "invalid_number"
}

// CheckName checks a required free-text field: 1 to max characters, valid UTF-8, no control
// characters. Its code is invalid_<field> (a field left out is the API's missing_field).
func CheckName(field, s string, max int) error {
	if strings.TrimSpace(s) == "" {
		return Invalid("invalid_"+field, "%s must not be empty", field).WithField(field)
	}
	return CheckOptionalText(field, s, max)
}

// CheckOptionalText checks an optional free-text field: at most max characters, valid UTF-8, no
// control characters.
func CheckOptionalText(field, s string, max int) error {
	if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return Invalid("invalid_"+field, "%s has control characters or invalid UTF-8", field).WithField(field)
	}
	if utf8.RuneCountInString(s) > max {
		return Invalid("invalid_"+field, "%s is longer than %d characters", field, max).WithField(field)
	}
	return nil
}

// Quantity defaults a request's quantity and bounds it.
func Quantity(q int) (int, error) {
	if q == 0 {
		return DefaultQuantity, nil
	}
	return q, CheckRange(FieldQuantity, int64(q))
}

// PageSize defaults and bounds a list's page size.
func PageSize(n int) (int, error) {
	if n == 0 {
		return DefaultPageSize, nil
	}
	return n, CheckRange(FieldLimit, int64(n))
}

// The states of what a venue sells (a resource, a service): an active one is offered and can be
// held; a disabled one is not offered to new holds, and the bookings already made of it stay as
// they are unless the change cancels them.
const (
	CatalogActive   = "active"
	CatalogDisabled = "disabled"
)

// CheckCatalogStatus checks the status an edit gives a resource or a service.
func CheckCatalogStatus(s string) error {
	if s != CatalogActive && s != CatalogDisabled {
		return Invalid("invalid_status", "status must be active or disabled").WithField("status")
	}
	return nil
}

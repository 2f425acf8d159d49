package sqlstore

import (
	"strconv"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// Page is one page of a list read newest first (see newestFirst): the rows after the cursor's row,
// one more than the page shows, so that NextPage can tell whether another page follows.
type Page struct {
	BeforeID uint64 // the cursor: the id of the last row of the previous page; 0 for the first page
	Limit    int    // how many rows to read
}

// ParsePage reads a client's cursor (a next cursor this server gave; "" for the first page) and
// page size (0 for the default) into the Page to read.
func ParsePage(cursor string, limit int) (Page, error) {
	n, err := booking.PageSize(limit)
	if err != nil {
		return Page{}, err
	}
	p := Page{Limit: n + 1}
	if cursor != "" {
		if p.BeforeID, err = strconv.ParseUint(cursor, 10, 64); err != nil || len(cursor) > booking.MaxCursorLen {
			return Page{}, booking.Invalid("invalid_cursor", "cursor %q is not one this server gave", cursor).WithField("cursor")
		}
	}
	return p, nil
}

// NextPage trims rows read with p to the page, and returns the cursor of the next page, "" when
// none follows; id is a row's id.
func NextPage[T any](p Page, rows []T, id func(T) uint64) ([]T, string) {
	n := p.Limit - 1
	if n < 1 || len(rows) <= n {
		return rows, ""
	}
	rows = rows[:n]
	return rows, strconv.FormatUint(id(rows[n-1]), 10)
}

// newestFirst orders a list newest first by created_at, ids breaking ties, keeps the rows that come
// after the cursor's row (the last row of the previous page) in this order, and reads p.Limit.
// Creation time, not the auto-increment id, is what "newest" means: a store that hands each of its
// servers a range of ids (TiDB caches AUTO_INCREMENT per server; Vitess sequences in blocks)
// gives a later row a smaller id as often as not. The cursor stays an id, so clients see no change.
func newestFirst(db *gorm.DB, table string, p Page) *gorm.DB {
	db = db.Order("created_at DESC, id DESC").Limit(p.Limit)
	if p.BeforeID == 0 {
		return db
	}
	// The cursor's row is found by its primary key; an unknown cursor matches no row, so it ends
	// the list instead of starting it again.
	at := "(SELECT created_at FROM " + table + " WHERE id = ?)"
	return db.Where("(created_at < "+at+" OR (created_at = "+at+" AND id < ?))", p.BeforeID, p.BeforeID, p.BeforeID)
}

package sqlstore

import "gorm.io/gorm"

// newestFirst orders a list newest first by created_at, ids breaking ties, and with a cursor (the
// id of the last row of the previous page) keeps the rows that come after that row in this order.
// Creation time, not the auto-increment id, is what "newest" means: a store that hands each of its
// servers a range of ids (TiDB caches AUTO_INCREMENT per server; Vitess sequences in blocks)
// gives a later row a smaller id as often as not. The cursor stays an id, so clients see no change.
func newestFirst(db *gorm.DB, table string, beforeID uint64) *gorm.DB {
	db = db.Order("created_at DESC, id DESC")
	if beforeID == 0 {
		return db
	}
	// The cursor's row is found by its primary key; an unknown cursor matches no row, so it ends
	// the list instead of starting it again.
	at := "(SELECT created_at FROM " + table + " WHERE id = ?)"
	return db.Where("(created_at < "+at+" OR (created_at = "+at+" AND id < ?))", beforeID, beforeID, beforeID)
}

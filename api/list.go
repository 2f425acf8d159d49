package api

// A collection answers {"items": [...], "next_cursor": "..."} (docs/API.md "Ids and lists").
type listResponse[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

func toList[E, R any](in []E, next string, conv func(E) R) listResponse[R] {
	return listResponse[R]{Items: convertAll(in, conv), NextCursor: next}
}

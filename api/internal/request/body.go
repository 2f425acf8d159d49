package request

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
)

// MaxBody is the largest request body read; larger ones are refused with 413 body_too_large.
const MaxBody = 1 << 20

const ctxBody = "slotwheel.body"

// ReadBody reads the whole body (at most MaxBody bytes) once, for hashing, signature checks and
// strict decoding; Body answers it.
func (r Reader) ReadBody(c *gin.Context) {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			r.Fail(c, answer.ErrBodyTooLarge)
			return
		}
		r.Fail(c, answer.BadRequest("invalid_json", "the body could not be read"))
		return
	}
	c.Set(ctxBody, raw)
	c.Request.Body = io.NopCloser(bytes.NewReader(raw))
	c.Next()
}

// Body is the body ReadBody read; nil on routes without it.
func Body(c *gin.Context) []byte {
	b, _ := c.Get(ctxBody)
	raw, _ := b.([]byte)
	return raw
}

package wechatpay

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Notification is a verified, decrypted WeChat Pay callback.
type Notification struct {
	ID           string
	EventType    string // TRANSACTION.SUCCESS, REFUND.SUCCESS, REFUND.ABNORMAL, REFUND.CLOSED, ...
	ResourceType string // "encrypt-resource"
	Summary      string
	CreateTime   time.Time
	OriginalType string // "transaction" or "refund": what Plaintext decodes to
	Plaintext    []byte // the decrypted resource JSON
}

// ParseNotification authenticates a callback (headers and the raw body exactly as received) and
// decrypts its resource. Each check fails with its own sentinel: ErrUnknownSerial, ErrStaleTimestamp
// (replay window), ErrBadSignature, ErrDecrypt, and ErrMismatch when the resource names another
// mchid/appid (a genuine notification meant for a different merchant account must not be applied).
// Answer WeChat 2xx only after the notification is durably handled: it retries anything else.
func (c *Client) ParseNotification(h http.Header, body []byte) (*Notification, error) {
	if err := c.verify(h, body); err != nil {
		return nil, fmt.Errorf("wechatpay: notification: %w", err)
	}
	var env struct {
		ID           string    `json:"id"`
		CreateTime   time.Time `json:"create_time"`
		ResourceType string    `json:"resource_type"`
		EventType    string    `json:"event_type"`
		Summary      string    `json:"summary"`
		Resource     struct {
			OriginalType   string `json:"original_type"`
			Algorithm      string `json:"algorithm"`
			Ciphertext     string `json:"ciphertext"`
			AssociatedData string `json:"associated_data"`
			Nonce          string `json:"nonce"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("wechatpay: notification body: %w", err)
	}
	res := env.Resource
	if res.Algorithm != "AEAD_AES_256_GCM" {
		return nil, fmt.Errorf("%w: notification %s: algorithm %q", ErrDecrypt, env.ID, res.Algorithm)
	}
	plain, err := c.decrypt(res.Ciphertext, res.Nonce, res.AssociatedData)
	if err != nil {
		return nil, fmt.Errorf("%w: notification %s: %v", ErrDecrypt, env.ID, err)
	}
	var ids struct {
		MchID string `json:"mchid"`
		AppID string `json:"appid"` // refund resources carry no appid
	}
	if err := json.Unmarshal(plain, &ids); err != nil {
		return nil, fmt.Errorf("%w: notification %s: resource is not JSON", ErrDecrypt, env.ID)
	}
	if ids.MchID != c.cfg.MchID || (ids.AppID != "" && ids.AppID != c.cfg.AppID) {
		return nil, fmt.Errorf("%w: notification %s is for mchid %q appid %q", ErrMismatch, env.ID, ids.MchID, ids.AppID)
	}
	return &Notification{
		ID: env.ID, EventType: env.EventType, ResourceType: env.ResourceType, Summary: env.Summary,
		CreateTime: env.CreateTime, OriginalType: res.OriginalType, Plaintext: plain,
	}, nil
}

// decrypt opens an AEAD_AES_256_GCM resource: the nonce and associated data are used as raw
// strings, the ciphertext is base64 with the 16-byte tag appended.
func (c *Client) decrypt(ciphertext, nonce, ad string) ([]byte, error) {
	ct, err := base64.StdEncoding.DecodeString(ciphertext)
	if err != nil {
		return nil, fmt.Errorf("ciphertext is not base64")
	}
	block, err := aes.NewCipher(c.cfg.APIv3Key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if len(nonce) != gcm.NonceSize() { // Open panics on a wrong-size nonce
		return nil, fmt.Errorf("nonce is %d bytes, want %d", len(nonce), gcm.NonceSize())
	}
	plain, err := gcm.Open(nil, []byte(nonce), ct, []byte(ad))
	if err != nil {
		return nil, fmt.Errorf("authentication failed (wrong APIv3 key or corrupted resource)")
	}
	return plain, nil
}

// Transaction decodes a TRANSACTION.* notification.
func (n *Notification) Transaction() (Transaction, error) {
	if n.OriginalType != "transaction" {
		return Transaction{}, fmt.Errorf("wechatpay: notification %s carries %q, not a transaction", n.ID, n.OriginalType)
	}
	var t Transaction
	if err := json.Unmarshal(n.Plaintext, &t); err != nil {
		return Transaction{}, fmt.Errorf("wechatpay: notification %s: %w", n.ID, err)
	}
	return t, nil
}

// RefundResult decodes a REFUND.* notification.
func (n *Notification) RefundResult() (RefundResult, error) {
	if n.OriginalType != "refund" {
		return RefundResult{}, fmt.Errorf("wechatpay: notification %s carries %q, not a refund", n.ID, n.OriginalType)
	}
	var v struct {
		RefundResult
		RefundStatus string `json:"refund_status"` // notifications name the status field so
	}
	if err := json.Unmarshal(n.Plaintext, &v); err != nil {
		return RefundResult{}, fmt.Errorf("wechatpay: notification %s: %w", n.ID, err)
	}
	v.Status = v.RefundStatus
	return v.RefundResult, nil
}

// AckNotification tells WeChat the notification was handled, which stops its retries.
func AckNotification(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

// RejectNotification asks WeChat to deliver the notification again later, in the documented
// {"code":"FAIL","message":...} form.
func RejectNotification(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": "FAIL", "message": message})
}

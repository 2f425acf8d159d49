package wechatpay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// LoadPrivateKey reads the merchant API private key (apiclient_key.pem): PKCS#8 "PRIVATE KEY",
// as the merchant platform issues it, or PKCS#1 "RSA PRIVATE KEY".
func LoadPrivateKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("wechatpay: %w", err)
	}
	return ParsePrivateKeyPEM(data)
}

// ParsePrivateKeyPEM is LoadPrivateKey for bytes already in memory.
func ParsePrivateKeyPEM(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("wechatpay: no PEM block in private key")
	}
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("wechatpay: PKCS#8 private key: %w", err)
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("wechatpay: private key is %T, WeChat Pay needs RSA", k)
		}
		return rk, nil
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("wechatpay: PKCS#1 private key: %w", err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("wechatpay: PEM block %q is not a private key", block.Type)
}

// LoadPublicKey reads a key WeChat signs with. A "PUBLIC KEY" PEM (the WeChat Pay public key,
// pub_key.pem) returns serial "": its id ("PUB_KEY_ID_...") is shown in the merchant platform and
// must be supplied separately. A "CERTIFICATE" PEM (platform certificate) returns its serial number
// in uppercase hex, the form WeChat sends in Wechatpay-Serial.
func LoadPublicKey(path string) (key *rsa.PublicKey, serial string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("wechatpay: %w", err)
	}
	return ParsePublicKeyPEM(data)
}

// ParsePublicKeyPEM is LoadPublicKey for bytes already in memory.
func ParsePublicKeyPEM(data []byte) (*rsa.PublicKey, string, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, "", errors.New("wechatpay: no PEM block in public key")
	}
	var (
		k      any
		serial string
		err    error
	)
	switch block.Type {
	case "PUBLIC KEY":
		k, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		k, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			k, serial = cert.PublicKey, fmt.Sprintf("%X", cert.SerialNumber)
		}
	default:
		return nil, "", fmt.Errorf("wechatpay: PEM block %q is neither a public key nor a certificate", block.Type)
	}
	if err != nil {
		return nil, "", fmt.Errorf("wechatpay: %s: %w", block.Type, err)
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, "", fmt.Errorf("wechatpay: public key is %T, WeChat Pay signs with RSA", k)
	}
	return rk, serial, nil
}

// ValidOutNo reports whether s can be used as out_trade_no / out_refund_no: 6–32 characters of
// [A-Za-z0-9_-]. WeChat allows a few more symbols; this stricter set also keeps the id safe to put
// in a URL path unescaped.
func ValidOutNo(s string) bool {
	if len(s) < 6 || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

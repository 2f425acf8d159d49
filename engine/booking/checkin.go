package booking

import "strings"

// CheckinQRPrefix starts the payload of a check-in QR code: SWCHK:<checkin_code>. The prefix tells
// a desk's scanner that the code is a slotwheel booking's and not some other QR code it was shown;
// with an 8-letter code the payload is 14 characters of QR's alphanumeric set, which fit the
// smallest symbol (version 1, 21×21 modules) at medium error correction, so a worn or glossy phone
// screen still scans.
const CheckinQRPrefix = "SWCHK:"

// CheckinQRPayload is what a booking's check-in QR code carries.
func CheckinQRPayload(code string) string { return CheckinQRPrefix + code }

// ScannedCheckinCode is the check-in code a desk sent: typed by hand (in any letter case, with
// stray spaces) or the whole payload of a scanned QR code, which a scanner app may pass on as read.
func ScannedCheckinCode(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	return strings.TrimSpace(strings.TrimPrefix(s, CheckinQRPrefix))
}

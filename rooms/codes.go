package rooms

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// Join codes are CodeLength characters from codeAlphabet, 32 letters and
// digits without the letters a projector makes ambiguous (O, I, L, U): 32^8 ≈
// 1.1·10^12 codes. Wrong codes are limited per address
// (Limits.FailedJoinsPerMinute, 30 a minute in bursts of 30 by default), and
// while an address has spent them every code from it is refused, the right
// ones too, so the limit never tells a guesser which code is right. One
// address so gets about 43 200 guesses a day; with the default bound of 1000
// open rooms that finds some room with a probability of about
// 43 200 · 1000 / 1.1·10^12 ≈ 4·10^-5 a day, and a given room about
// 4·10^-8. A code only lets a student watch and answer polls; steering the
// room needs the control token.
const (
	CodeLength   = 8
	codeAlphabet = "ABCDEFGHJKMNPQRSTVWXYZ0123456789"
)

// NewCode draws a room's join code; NewToken a control token. Services
// other than Memory (natsrooms) use them.
func NewCode() string { return newCode() }

// NewToken is a fresh control token.
func NewToken() string { return newToken() }

// newCode draws a code uniformly: 256 is a multiple of 32, so taking each
// byte modulo 32 has no bias.
func newCode() string {
	b := make([]byte, CodeLength)
	rand.Read(b)
	for i := range b {
		b[i] = codeAlphabet[b[i]%32]
	}
	return string(b)
}

// NormalizeCode reads a code as a person types it: any case, with spaces
// or dashes, and the letters a projector confuses read as the symbols they
// look like (O as 0, I and L as 1, U as V). It returns "" for anything that cannot be a code.
func NormalizeCode(s string) string {
	s = strings.NewReplacer(" ", "", "-", "", "O", "0", "I", "1", "L", "1", "U", "V").Replace(strings.ToUpper(s))
	if len(s) != CodeLength {
		return ""
	}
	for _, c := range s {
		if !strings.ContainsRune(codeAlphabet, c) {
			return ""
		}
	}
	return s
}

// FormatCode splits a code in two halves for reading aloud: "K7QM-4TXZ".
func FormatCode(code string) string {
	if len(code) != CodeLength {
		return code
	}
	return code[:CodeLength/2] + "-" + code[CodeLength/2:]
}

// A student's identity: StudentBytes random bits' worth of bytes, as
// unpadded URL-safe base64, kept by the student's browser in a cookie
// scoped to the room. A poll counts one answer per identity, however many
// connections (tabs, reconnects) it has.
const (
	StudentBytes  = 16 // 128 bits
	studentLength = 22 // its base64 characters
)

// NewStudent draws a fresh student identity.
func NewStudent() string {
	b := make([]byte, StudentBytes)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ValidStudent says whether s is a well-formed student identity, as
// NewStudent draws them: exactly 22 characters of URL-safe base64 that
// decode to 16 bytes. Anything else (a cookie a script forged, a value cut
// short) is replaced by a fresh identity, never used as it is.
func ValidStudent(s string) bool {
	if len(s) != studentLength {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == StudentBytes
}

// newToken is a control token: 256 random bits, URL-safe base64.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenHash is what a room keeps of its token, so that a memory dump or a
// log of room state never holds the token itself.
type tokenHash [sha256.Size]byte

func hashToken(token string) tokenHash { return sha256.Sum256([]byte(token)) }

// matches compares in constant time: hashing first makes the comparison
// independent of the given token's length too.
func (h tokenHash) matches(token string) bool {
	if token == "" {
		return false
	}
	g := hashToken(token)
	return subtle.ConstantTimeCompare(h[:], g[:]) == 1
}

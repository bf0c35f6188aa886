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
// 1.1·10^12 codes. Failed joins are limited per address (Limits.FailedJoins
// a minute, 10 by default), so one address gets 14 400 guesses a day; with
// the default bound of 200 open rooms that finds some room with a
// probability of about 14 400 · 200 / 1.1·10^12 ≈ 3·10^-6 a day, and a
// given room about 1.3·10^-8. A code only lets a student watch; steering the
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

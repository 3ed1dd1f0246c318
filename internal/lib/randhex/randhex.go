// Package randhex makes random names for temporary files, handles and
// process-local owners.
package randhex

import (
	"crypto/rand"
	"encoding/hex"
)

// String returns n random bytes in hex (2n characters).
func String(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b)
}

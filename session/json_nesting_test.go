package session

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Objects nested deeper than 10,000 levels are refused like arrays are; 512
// levels are fine.
func TestCanonicalJSONObjectNestingLimit(t *testing.T) {
	nested := func(n int) string {
		return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
	}
	_, err := CanonicalJSON([]byte(nested(10001)))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNotLossless)
	assert.Equal(t, "not losslessly JSON-serializable: nesting too deep", err.Error())

	out, err := CanonicalJSON([]byte(nested(10000)))
	require.NoError(t, err)
	assert.Equal(t, nested(10000), string(out))
}

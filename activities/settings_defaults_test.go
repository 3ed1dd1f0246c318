package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A zero (or negative) HeartbeatInterval or ReadChunk takes the default; a
// positive one is used as set. A nil runtime has the default interval.
func TestSettingsDefaultWhenNotPositive(t *testing.T) {
	var zero Activities
	assert.Equal(t, time.Second, zero.runtime().HeartbeatEvery(context.Background()))
	assert.Equal(t, int64(65536), zero.chunk())

	neg := Activities{Runtime: &Runtime{HeartbeatInterval: -time.Second}, ReadChunk: -1}
	assert.Equal(t, time.Second, neg.runtime().HeartbeatEvery(context.Background()))
	assert.Equal(t, int64(65536), neg.chunk())

	set := Activities{Runtime: &Runtime{HeartbeatInterval: time.Millisecond}, ReadChunk: 1}
	assert.Equal(t, time.Millisecond, set.runtime().HeartbeatEvery(context.Background()))
	assert.Equal(t, int64(1), set.chunk())
}

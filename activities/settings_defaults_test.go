package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A zero (or negative) HeartbeatInterval or ReadChunk takes the default; a
// positive one is used as set.
func TestSettingsDefaultWhenNotPositive(t *testing.T) {
	var zero Activities
	assert.Equal(t, 2*time.Second, zero.interval(context.Background()))
	assert.Equal(t, int64(65536), zero.chunk())

	neg := Activities{HeartbeatInterval: -time.Second, ReadChunk: -1}
	assert.Equal(t, 2*time.Second, neg.interval(context.Background()))
	assert.Equal(t, int64(65536), neg.chunk())

	set := Activities{HeartbeatInterval: time.Millisecond, ReadChunk: 1}
	assert.Equal(t, time.Millisecond, set.interval(context.Background()))
	assert.Equal(t, int64(1), set.chunk())
}

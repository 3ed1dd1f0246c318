package main

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestElapsedLineDrawsOnlyOnATerminalAndOnlyWhenSlow(t *testing.T) {
	var quiet lockedBuffer
	startElapsed(&quiet, false, "repairing", 0, time.Millisecond).stopElapsed()
	require.Empty(t, quiet.String(), "nothing is drawn when stderr is not a terminal")

	var fast lockedBuffer
	startElapsed(&fast, true, "repairing", time.Hour, time.Millisecond).stopElapsed()
	require.Empty(t, fast.String(), "a quick operation shows nothing")

	var slow lockedBuffer
	e := startElapsed(&slow, true, "repairing", 0, time.Millisecond)
	require.Eventually(t, func() bool { return bytes.Count([]byte(slow.String()), []byte("\rrepairing: ")) >= 2 }, 5*time.Second, time.Millisecond)
	e.stopElapsed()
	require.Regexp(t, `\rrepairing: done in [0-9.]+m?s\n$`, slow.String())
}

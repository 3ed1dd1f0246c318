package cli

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A port the dev server needs may be taken between the test's pick and the
// server's bind (another package's process): the worker exits, and the
// test starts it again on new ports instead of failing.
func TestWorkerStartsAgainWhenAPortIsTaken(t *testing.T) {
	e := newEnv(t)
	taken, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(e.uiPort)))
	require.NoError(t, err)
	defer taken.Close()
	takenPort := e.uiPort

	e.startWorker(true)
	require.Equal(t, 2, e.starts, "the first start fails on the taken port, the second runs")
	require.NotEqual(t, takenPort, e.uiPort)
	require.NoError(t, e.ready(e.ctx), "the restarted worker serves")
}

package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// A worker started with `--preset read-only` gives a session created with
// no permission flags its bundle, pinned in the log. Killed and restarted
// with other defaults, the worker replays the live session with the
// permissions its history recorded; disposed and resumed there, the
// session keeps the log's, while a session created on that worker takes
// its defaults.
func TestWorkerPermissionDefaultsThroughTheWorker(t *testing.T) {
	e := newEnv(t)
	e.workerArgs = []string{"--preset", "read-only"}
	e.startWorker(false)
	perms := func(id string) wire.Permissions {
		var p wire.Permissions
		out := e.mustStarter("", "permissions", "--id", id, "--json")
		require.NoError(t, json.Unmarshal([]byte(out), &p), out)
		return p
	}
	readOnly := wire.Permissions{SandboxMode: "read-only", ApprovalPolicy: "ask", Preset: "read-only"}
	e.mustStarter("", "create", "--id", "wd1", "--cwd", "/work")
	require.Equal(t, readOnly, perms("wd1"))

	e.kill()
	e.workerArgs = []string{"--sandbox-mode", "danger-full-access", "--approval-policy", "never"}
	e.startWorker(false)
	require.Equal(t, readOnly, perms("wd1"), "the live session's history holds the first worker's defaults")
	e.mustStarter("", "dispose", "--id", "wd1")
	e.mustStarter("", "resume", "--id", "wd1")
	require.Equal(t, readOnly, perms("wd1"), "the log's facts win over the worker's defaults")
	e.mustStarter("", "create", "--id", "wd2", "--cwd", "/work")
	require.Equal(t, wire.Permissions{SandboxMode: "danger-full-access", ApprovalPolicy: "never", Preset: "danger-full-access"}, perms("wd2"))
	e.mustStarter("", "dispose", "--id", "wd1")
	e.mustStarter("", "dispose", "--id", "wd2")

	var types []string
	for _, ev := range e.stored("wd1") {
		types = append(types, ev.Type)
	}
	require.Equal(t, []string{"permission/preset", "sandbox/mode", "approval/policy", "session/end-seed"}, types, "nothing pinned again at resume")
}

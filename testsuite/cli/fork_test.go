package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
)

// A person forks a session at a turn: `starter fork --id S --at-turn N
// --new-id T` creates a live session holding S's turns through N, which
// runs its next turn on the route S's turns recorded (the scripted model
// answers by the assistant messages the conversation holds, so the fork's
// answer shows it holds turn 1 only); a fork of the fork; a turn S never
// had is refused; `log list` shows each session's parent.
func TestStarterFork(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	cwd := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[
		{"text":"First answer."},
		{"text":"Second answer."},
		{"text":"Third answer."}
	]}`), 0o644))
	e.workerArgs = []string{"--provider-script", script}
	e.startWorker(true)
	store := []string{"--root", e.root, "--compression", "none"}
	e.mustStarter("", "create", "--id", "p", "--cwd", cwd, "--provider", "scripted", "--model", "m1")
	e.mustStarter("", append([]string{"turn", "--id", "p", "--prompt", "one"}, store...)...)
	e.mustStarter("", append([]string{"turn", "--id", "p", "--prompt", "two"}, store...)...)
	before := e.stored("p")

	out := e.mustStarter("", "fork", "--id", "p", "--at-turn", "1", "--new-id", "f")
	require.Contains(t, out, `session "f" is live`)
	require.Regexp(t, `(?m)^  parent +p$`, out)
	require.Regexp(t, `(?m)^  cwd +`+regexp.QuoteMeta(cwd)+`$`, out)
	require.Regexp(t, `(?m)^  last turn +1$`, out)
	out = e.mustStarter("", append([]string{"turn", "--id", "f", "--prompt", "three"}, store...)...)
	require.True(t, strings.HasSuffix(out, "Second answer.\nturn 2 completed\n"), "output:\n%s", out)

	out = e.mustStarter("", "fork", "--id", "f", "--new-id", "g", "--json")
	require.Contains(t, out, `"parentSession": "f"`)
	require.Contains(t, out, `"lastTurn": 2`)

	_, err := e.starter("", "fork", "--id", "p", "--at-turn", "5", "--new-id", "x")
	require.ErrorContains(t, err, `cannot fork session "p" at turn 5: its last turn is 2`)

	for _, id := range []string{"p", "f", "g"} {
		e.mustStarter("", "dispose", "--id", id)
	}
	require.Equal(t, before, e.stored("p"), "the parent is untouched")
	f := e.stored("f")
	requireContiguous(t, f)
	inherited, err := f[indexOfTurnEnd(t, before, 1)+1].IsInheritedMarker()
	require.NoError(t, err)
	require.True(t, inherited)

	list, errOut, err := logCLI(t, e.root, "list", "--compression", "none")
	require.NoError(t, err, errOut)
	parents := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n")[1:] {
		fields := strings.Fields(line)
		parents[fields[0]] = fields[len(fields)-1]
	}
	require.Equal(t, map[string]string{"p": "-", "f": "p", "g": "f"}, parents)
}

// indexOfTurnEnd returns the index of turn's turn/end in evs.
func indexOfTurnEnd(t *testing.T, evs []session.Event, turn int64) int {
	t.Helper()
	for i, e := range evs {
		if e.Type == "turn/end" {
			te, err := e.TurnEnd()
			require.NoError(t, err)
			if te.Turn == turn {
				return i
			}
		}
	}
	t.Fatalf("no turn/end of turn %d", turn)
	return -1
}

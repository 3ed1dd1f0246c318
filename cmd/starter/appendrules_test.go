package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `log append` refuses every batch that used to leave a session unreadable,
// unrepairable or unresumable, naming the event and the rule, and writes
// nothing of it; the session can still be read and repaired.
func TestLogAppendRefusesWhatRepairOrResumeRefuse(t *testing.T) {
	for _, c := range []struct {
		name, line, want string
	}{
		{"inherited marker", `{"type":"session/end-seed","seq":1,"time":1,"data":{"inherited":true}}`,
			`invalid session event at index 0 (seq 1, type "session/end-seed"): unseeded Session contains an inherited end-seed marker`},
		{"inherited yes", `{"type":"session/end-seed","seq":1,"time":1,"data":{"inherited":"yes"}}`,
			`invalid session event at index 0 (seq 1, type "session/end-seed"): session/end-seed event (seq 1): malformed data`},
		{"turn/start {}", `{"type":"turn/start","seq":1,"time":1,"data":{}}`,
			`invalid session event at index 0 (seq 1, type "turn/start"): crash repair could not read it: turn/start event (seq 1): data lacks "turn"`},
		{"turn as a string", `{"type":"turn/start","seq":1,"time":1,"data":{"turn":"1"}}`,
			`invalid session event at index 0 (seq 1, type "turn/start"): crash repair could not read it: turn/start event (seq 1): malformed data`},
		{"turn 0", `{"type":"turn/start","seq":1,"time":1,"data":{"turn":0}}`,
			`invalid session event at index 0 (seq 1, type "turn/start"): crash repair could not read it: turn/start event (seq 1): data.turn must be a safe integer >= 1, got 0`},
		{"tool call without id", `{"type":"assistant/message","seq":1,"time":1,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","name":"x","arguments":{}}]},"stream":[]},"surfaceOp":"append"}`,
			`invalid session event at index 0 (seq 1, type "assistant/message"): crash repair could not read it: assistant/message event (seq 1): tool-call block 0 lacks "id"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, comp := range compressions {
				root := t.TempDir()
				mustOK(t, logCmd(t, root, comp, "", "create", "--id", "s"))
				mustOK(t, logCmd(t, root, comp, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`+"\n", "append", "--id", "s"))
				before := readFile(t, logPath(t, root, comp, "s"))
				mustFail(t, logCmd(t, root, comp, c.line+"\n", "append", "--id", "s"), 1, c.want)
				require.Equal(t, before, readFile(t, logPath(t, root, comp, "s")), "nothing of the refused batch is written")
				require.Len(t, catLines(t, root, comp, "s"), 2)
				r := mustOK(t, logCmd(t, root, comp, "", "repair", "--id", "s"))
				require.Equal(t, "1 turn/end\n2 session/end-seed\n", r.stdout)
			}
		})
	}
}

// `log repair` refuses a raw log whose damage is followed by valid records,
// touching nothing; --force cuts it at the damage after saving the removed
// bytes beside the log, then repairs.
func TestLogRepairForceCutsMidTailDamage(t *testing.T) {
	root := t.TempDir()
	path, committed := writeRawOpenTurnLog(t, root, "mid")
	// A garbage line in the middle of the open turn's records.
	lines := strings.SplitAfter(committed, "\n")
	damaged := strings.Join(lines[:3], "") + "garbage\n" + strings.Join(lines[3:], "")
	require.NoError(t, os.WriteFile(path, []byte(damaged), 0o600))
	off := len(strings.Join(lines[:3], ""))
	for _, sub := range []string{"cat", "inspect", "repair"} {
		mustFail(t, logCmd(t, root, "none", "", sub, "--id", "mid"), 1,
			fmt.Sprintf("the damage at byte %d is followed by a complete valid record at line 4 (byte %d), so it is not a torn write", off, off+len("garbage\n")))
	}
	mustFail(t, logCmd(t, root, "none", "", "repair", "--id", "mid"), 1,
		"(--force cuts the log at the damage after saving every byte it removes beside the log)")
	require.Equal(t, damaged, string(readFile(t, path)))
	require.Nil(t, leaseOf(t, root, "none", "mid"))

	r := mustOK(t, logCmd(t, root, "none", "", "repair", "--id", "mid", "--force"))
	q := fmt.Sprintf("%s.broken-%d", path, off)
	require.Equal(t, fmt.Sprintf("cut %d bytes at byte %d; saved to %s\n", len(damaged)-off, off, q)+
		"2 step/end\n3 turn/end\n4 session/end-seed\n", r.stdout)
	require.Equal(t, damaged[off:], string(readFile(t, q)))
	require.True(t, strings.HasPrefix(string(readFile(t, path)), damaged[:off]))
	require.Len(t, catLines(t, root, "none", "mid"), 6)
	require.Equal(t, "nothing to repair\n", mustOK(t, logCmd(t, root, "none", "", "repair", "--id", "mid", "--force")).stdout)
}

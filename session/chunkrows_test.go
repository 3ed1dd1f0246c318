package session

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// chunk builds an assistant/chunk event at seq and time.
func chunk(seq, time int64, data string) Event {
	return Event{Type: wire.TypeAssistantChunk, Seq: seq, Time: time, Data: []byte(data)}
}

// packLines packs a batch and returns its lines.
func packLines(t *testing.T, batch []Event) []string {
	t.Helper()
	b, err := AppendPackedLines(nil, batch)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// readLines decodes storage lines and expands their rows, as a read does.
func readLines(t *testing.T, lines []string) []Event {
	t.Helper()
	var out []Event
	var d LineDecoder
	for _, l := range lines {
		e, err := d.Decode([]byte(l))
		require.NoError(t, err, l)
		if IsChunkRow(e) {
			members, err := ExpandChunkRow(e)
			require.NoError(t, err)
			out = append(out, members...)
			continue
		}
		out = append(out, e)
	}
	return out
}

func TestPackedRowsPackRunsAndReadBackExactly(t *testing.T) {
	batch := []Event{
		mk(wire.TypeStepStart, 0, `{"turn":1,"step":1}`),
		chunk(1, 100, `{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}`),
		chunk(2, 100, `{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"Hel"}}`),
		chunk(3, 104, `{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"lo \"w\""}}`),
		chunk(4, 101, `{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"orld"}}`),
		// A new block index ends the run; two deltas stay lines.
		chunk(5, 110, `{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":1,"text":"a"}}`),
		chunk(6, 111, `{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":1,"text":"b"}}`),
		chunk(7, 120, `{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"read_file","argumentsDelta":"{\"pa"}}`),
		chunk(8, 121, `{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"read_file","argumentsDelta":"th\":"}}`),
		chunk(9, 122, `{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"read_file","argumentsDelta":"\"a\"}"}}`),
		// An extra key is not the whitelisted shape: stored as it is.
		chunk(10, 130, `{"turn":1,"step":1,"chunk":{"type":"text-delta","index":3,"text":"x","extra":1}}`),
	}
	lines := packLines(t, batch)
	assert.Equal(t, []string{
		`{"type":"step/start","seq":0,"time":1000,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/chunk","seq":1,"time":100,"data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}`,
		`{"type":"text-chunks","seq0":2,"time0":100,"data":{"turn":1,"step":1,"index":0,"dt":[4,-3],"texts":["Hel","lo \"w\"","orld"]}}`,
		`{"type":"assistant/chunk","seq":5,"time":110,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":1,"text":"a"}}}`,
		`{"type":"assistant/chunk","seq":6,"time":111,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":1,"text":"b"}}}`,
		`{"type":"tool-call-chunks","seq0":7,"time0":120,"data":{"turn":1,"step":1,"index":2,"dt":[1,1],"id":"c1","name":"read_file","args":["{\"pa","th\":","\"a\"}"]}}`,
		`{"type":"assistant/chunk","seq":10,"time":130,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":3,"text":"x","extra":1}}}`,
	}, lines)
	got := readLines(t, lines)
	require.Len(t, got, len(batch))
	for i := range batch {
		assert.Equal(t, encodeLine(t, batch[i]), encodeLine(t, got[i]))
	}
}

func TestPackedRowsKeepNumbersAsSpelled(t *testing.T) {
	batch := []Event{
		chunk(0, 5, `{"turn":1.5,"step":2,"chunk":{"type":"text-delta","index":1e0,"text":"a"}}`),
		chunk(1, 5, `{"turn":1.5,"step":2,"chunk":{"type":"text-delta","index":1e0,"text":"b"}}`),
		chunk(2, 5, `{"turn":1.5,"step":2,"chunk":{"type":"text-delta","index":1e0,"text":"c"}}`),
	}
	lines := packLines(t, batch)
	require.Equal(t, []string{`{"type":"text-chunks","seq0":0,"time0":5,"data":{"turn":1.5,"step":2,"index":1e0,"dt":[0,0],"texts":["a","b","c"]}}`}, lines)
	got := readLines(t, lines)
	for i := range batch {
		assert.Equal(t, encodeLine(t, batch[i]), encodeLine(t, got[i]))
	}
}

func TestMalformedChunkRowsAreRefused(t *testing.T) {
	cases := map[string]string{
		`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a"]}}`:                    "malformed chunk storage row: malformed text-chunks storage row: dt length 1 does not match 1 members",
		`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}`:                        "malformed chunk storage row: malformed text-chunks storage row: texts must be a non-empty string array",
		`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a",2]}}`:                  "malformed chunk storage row: malformed text-chunks storage row: texts must be a non-empty string array",
		`{"type":"text-chunks","seq":0,"time":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}`:                       "malformed chunk storage row: malformed text-chunks storage row: envelope must be exactly {type, seq0, time0, data}",
		`{"type":"reasoning-chunks","seq0":-1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}`:               "malformed chunk storage row: malformed reasoning-chunks storage row: seq0 must be a non-negative safe integer",
		`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":"1","step":1,"index":0,"dt":[],"texts":["a"]}}`:                   "malformed chunk storage row: malformed text-chunks storage row: turn/step/index must be numbers",
		`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1.5],"texts":["a","b"]}}`:              "malformed chunk storage row: malformed text-chunks storage row: dt must be an array of safe integers",
		`{"type":"tool-call-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"id":7,"args":["a"]}}`:          "malformed chunk storage row: malformed tool-call-chunks storage row: id (and name when present) must be strings",
		`{"type":"tool-call-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}`:                "malformed chunk storage row: malformed tool-call-chunks storage row: data must be exactly {turn, step, index, id, name?, dt, args}",
		`{"type":"text-chunks","seq0":0,"time0":9007199254740990,"data":{"turn":1,"step":1,"index":0,"dt":[5],"texts":["a","b"]}}`: "malformed chunk storage row: malformed text-chunks storage row: member times must stay safe integers",
	}
	for line, want := range cases {
		var d LineDecoder
		_, err := d.Decode([]byte(line))
		require.Error(t, err, line)
		assert.ErrorIs(t, err, ErrMalformedChunkRow, line)
		assert.Equal(t, want, err.Error(), line)
	}
}

// Deltas whose keys are not in the order a row expands to stay lines, so
// every stored event reads back byte for byte.
func TestPackedRowsNeedTheExpandedKeyOrder(t *testing.T) {
	batch := []Event{
		chunk(0, 5, `{"step":1,"turn":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}`),
		chunk(1, 5, `{"step":1,"turn":1,"chunk":{"type":"text-delta","index":0,"text":"b"}}`),
		chunk(2, 5, `{"turn":1,"step":1,"chunk":{"index":0,"type":"text-delta","text":"c"}}`),
	}
	lines := packLines(t, batch)
	require.Len(t, lines, 3)
	got := readLines(t, lines)
	for i := range batch {
		assert.Equal(t, encodeLine(t, batch[i]), encodeLine(t, got[i]))
	}
}

package session

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// The verdicts below are the published harness's: each event was stored in
// an otherwise valid log and loaded by @deepseek-ai/dsh-session-persistence-
// jsonl 0.1.0-rc.8, which accepted the log or refused it for that event; the
// upgraded events are what its load returned, byte for byte.

const (
	okUser      = `{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`
	okAssistant = `{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},` +
		`"content":[{"type":"text","text":"ok"},{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}]}}`
	okResult = `{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"c1"},` +
		`"content":[{"type":"tool-result","toolCallId":"c1","isError":false,"content":[{"type":"text","text":"data"}]}]}}`
)

// ev builds an event at seq 4, time 104, with an append surfaceOp on the
// surface types.
func ev(typ, data string) Event {
	e := Event{Type: typ, Seq: 4, Time: 104, Data: []byte(data)}
	if typ == wire.TypeUserMessage || typ == wire.TypeAssistantMessage || typ == wire.TypeToolResult || typ == TypeLegacySteeringMessage {
		e.SurfaceOp = AppendOp()
	}
	return e
}

func TestCheckHarnessEventAccepts(t *testing.T) {
	negative := ev(wire.TypeTurnStart, `{"turn":1}`)
	negative.Time = -5
	for name, e := range map[string]Event{
		"a user/message":               ev(wire.TypeUserMessage, okUser),
		"an assistant/message":         ev(wire.TypeAssistantMessage, okAssistant),
		"a block that is a number":     ev(wire.TypeAssistantMessage, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[5]}}`),
		"a tool/result":                ev(wire.TypeToolResult, okResult),
		"a request/header":             ev(wire.TypeRequestHeader, `{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"}},"reason":"initial"}`),
		"adapterDefaults it sets":      ev(wire.TypeRequestHeader, `{"header":{"config":{"provider":"p","model":"m","reasoningEffort":"high"},"adapterDefaults":{"reasoningEffort":true}}}`),
		"turn/end completed":           ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"completed"}}`),
		"turn/end aborted, legacy":     ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"aborted"}}`),
		"turn/end disposed":            ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"disposed"}}`),
		"turn/end error, legacy":       ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"error","step":1,"message":"boom"}}`),
		"turn/end error with failure":  ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"error","step":1,"failure":{"message":"boom","code":"E","status":500}}}`),
		"turn/end of another kind":     ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"weird","x":1}}`),
		"turn/start with a trigger":    ev(wire.TypeTurnStart, `{"turn":1,"trigger":{"kind":"message"}}`),
		"turn/start with a string":     ev(wire.TypeTurnStart, `{"turn":"x"}`),
		"a legacy user/message":        ev(wire.TypeUserMessage, `{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`),
		"a legacy assistant/message":   ev(wire.TypeAssistantMessage, `{"turn":1,"step":1,"content":[],"provenance":{"provider":"deepseek","model":"deepseek-chat"}}`),
		"a legacy tool/result":         ev(wire.TypeToolResult, `{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"data"}],"isError":false}`),
		"a steering/message":           ev(TypeLegacySteeringMessage, `{"turn":1,"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`),
		"a wrapped steering/message":   ev(TypeLegacySteeringMessage, `{"turn":1,"message":{"id":"u1","role":"user","content":[],"source":{"kind":"user"}}}`),
		"a negative time":              negative,
		"a type it does not look into": ev("session/title", `{"title":[1,2]}`),
	} {
		assert.NoError(t, CheckHarnessEvent(e), name)
	}
}

func TestCheckHarnessEventRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		e    Event
		want string
	}{
		{"an empty message id", ev(wire.TypeUserMessage, `{"id":"","role":"user","content":[],"source":{"kind":"user"}}`),
			`"user/message" event at seq 4: data is not a message with a non-empty string id`},
		{"a user/message of the wrong role", ev(wire.TypeUserMessage, `{"id":"u","role":"assistant","content":[],"source":{"kind":"user"}}`),
			`"user/message" event at seq 4: data.role is not "user"`},
		{"a source without kind", ev(wire.TypeUserMessage, `{"id":"u","role":"user","content":[],"source":{}}`),
			`"user/message" event at seq 4: data.source is not an object with a non-empty string kind`},
		{"content that is not an array", ev(wire.TypeUserMessage, `{"id":"u","role":"user","content":"x","source":{"kind":"user"}}`),
			`"user/message" event at seq 4: data.content is not an array`},
		{"an assistant/message of a user source", ev(wire.TypeAssistantMessage, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","source":{"kind":"user","provider":"p","model":"m"},"content":[]}}`),
			`"assistant/message" event at seq 4: data.message.source is not {kind:"model"} with a non-empty provider and model`},
		{"an assistant/message without provider", ev(wire.TypeAssistantMessage, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","source":{"kind":"model","model":"m"},"content":[]}}`),
			`"assistant/message" event at seq 4: data.message.source is not {kind:"model"} with a non-empty provider and model`},
		{"a null block", ev(wire.TypeAssistantMessage, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[null]}}`),
			`"assistant/message" event at seq 4: data.message.content[0] is null`},
		{"a tool/result of a user source", ev(wire.TypeToolResult, `{"message":{"id":"r","role":"user","source":{"kind":"user","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[]}]}}`),
			`"tool/result" event at seq 4: data.message.source is not {kind:"tool"} with a non-empty string callId`},
		{"two blocks", ev(wire.TypeToolResult, `{"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[]},{"type":"tool-result","toolCallId":"c1","content":[]}]}}`),
			`"tool/result" event at seq 4: data.message.content is not exactly one tool-result block with a content array`},
		{"a result block whose content is a string", ev(wire.TypeToolResult, `{"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":"x"}]}}`),
			`"tool/result" event at seq 4: data.message.content is not exactly one tool-result block with a content array`},
		{"mismatched call ids", ev(wire.TypeToolResult, `{"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c2","content":[]}]}}`),
			`"tool/result" event at seq 4: data.message.content[0].toolCallId is not the source's callId "c1"`},
		{"a request/header without provider", ev(wire.TypeRequestHeader, `{"header":{"config":{"model":"m"}}}`),
			`"request/header" event at seq 4: data.header.config lacks a non-empty provider and model`},
		{"an empty reasoningEffort", ev(wire.TypeRequestHeader, `{"header":{"config":{"provider":"p","model":"m","reasoningEffort":""}}}`),
			`"request/header" event at seq 4: data.header.config.reasoningEffort is not a non-empty string`},
		{"adapterDefaults config does not set", ev(wire.TypeRequestHeader, `{"header":{"config":{"provider":"p","model":"m"},"adapterDefaults":{"reasoningEffort":true}}}`),
			`"request/header" event at seq 4: data.header.adapterDefaults marks reasoningEffort, which config does not set`},
		{"adapterDefaults false", ev(wire.TypeRequestHeader, `{"header":{"config":{"provider":"p","model":"m","maxTokens":5},"adapterDefaults":{"maxTokens":false}}}`),
			`"request/header" event at seq 4: data.header.adapterDefaults has "maxTokens", not a true reasoningEffort or maxTokens`},
		{"the fallback reason", ev(wire.TypeRequestHeader, `{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}`),
			`"request/header" event at seq 4: the legacy reason "fallback" is no longer supported`},
		{"a turn/end with another key", ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"completed"},"x":1}`),
			`"turn/end" event at seq 4: a turn/end must be exactly {turn, reason} with turn >= 1, reason.kind a string, and the fields its kind calls for`},
		{"a completed reason with another key", ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"completed","x":1}}`),
			`"turn/end" event at seq 4: a turn/end must be exactly {turn, reason} with turn >= 1, reason.kind a string, and the fields its kind calls for`},
		{"a legacy error reason with a negative step", ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"error","step":-1,"message":"boom"}}`),
			`"turn/end" event at seq 4: a turn/end must be exactly {turn, reason} with turn >= 1, reason.kind a string, and the fields its kind calls for`},
		{"turn 0", ev(wire.TypeTurnEnd, `{"turn":0,"reason":{"kind":"completed"}}`),
			`"turn/end" event at seq 4: a turn/end must be exactly {turn, reason} with turn >= 1, reason.kind a string, and the fields its kind calls for`},
		{"turn 1e400", ev(wire.TypeTurnEnd, `{"turn":1e400,"reason":{"kind":"completed"}}`),
			`"turn/end" event at seq 4: a turn/end must be exactly {turn, reason} with turn >= 1, reason.kind a string, and the fields its kind calls for`},
		{"a trigger without kind", ev(wire.TypeTurnStart, `{"turn":1,"trigger":{}}`),
			`"turn/start" event at seq 4: a legacy turn/start must be exactly {turn, trigger} with turn >= 1 and a trigger kind`},
		{"a legacy assistant/message without provider", ev(wire.TypeAssistantMessage, `{"turn":1,"step":1,"content":[],"provenance":{"model":"m"}}`),
			`"assistant/message" event at seq 4: data.message.source is not {kind:"model"} with a non-empty provider and model`},
		{"a steering/message of neither form", ev(TypeLegacySteeringMessage, `{"turn":1}`),
			`"steering/message" event at seq 4: a steering/message must be {turn, message} or {turn, content, source}`},
		{"mode/set", ev(TypeLegacyModeSet, `{}`),
			`"mode/set" event at seq 4: the legacy type is no longer supported`},
		{"request/header-delta", ev(TypeLegacyRequestHeaderDelta, `{}`),
			`"request/header-delta" event at seq 4: the legacy type is no longer supported`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckHarnessEvent(c.e)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrHarnessShape))
			assert.Equal(t, "event does not have the shape the harness reads: "+c.want, err.Error())
		})
	}
}

func TestHarnessUpgraderUpgrades(t *testing.T) {
	at := func(e Event, seq int64) Event {
		e.Seq, e.Time = seq, 100+seq
		return e
	}
	for _, c := range []struct {
		name string
		in   Event
		want string
	}{
		{"turn/end aborted", at(ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"aborted"}}`), 8),
			`{"type":"turn/end","seq":8,"time":108,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}}`},
		{"turn/end disposed", at(ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"disposed"}}`), 8),
			`{"type":"turn/end","seq":8,"time":108,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}}`},
		{"turn/end error", at(ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"error","step":1,"message":"boom"}}`), 8),
			`{"type":"turn/end","seq":8,"time":108,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}}}`},
		{"turn/end error with failure", at(ev(wire.TypeTurnEnd, `{"turn":1,"reason":{"kind":"error","step":1,"failure":{"message":"boom","code":"E","status":500}}}`), 8),
			`{"type":"turn/end","seq":8,"time":108,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"boom","code":"E","status":500}}}}`},
		{"turn/start with a trigger", at(ev(wire.TypeTurnStart, `{"turn":1,"trigger":{"kind":"message"}}`), 0),
			`{"type":"turn/start","seq":0,"time":100,"data":{"turn":1}}`},
		{"a legacy user/message", at(ev(wire.TypeUserMessage, `{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`), 1),
			`{"type":"user/message","seq":1,"time":101,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"legacy-message:s:1","role":"user"},"surfaceOp":"append"}`},
		{"a legacy assistant/message", at(ev(wire.TypeAssistantMessage, `{"turn":1,"step":1,"content":[{"type":"text","text":"ok"},{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}],"provenance":{"provider":"deepseek","model":"deepseek-chat"},"usage":{"inputTokens":1}}`), 4),
			`{"type":"assistant/message","seq":4,"time":104,"data":{"turn":1,"step":1,"usage":{"inputTokens":1},"message":{"id":"legacy-message:s:4","role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}],"source":{"provider":"deepseek","model":"deepseek-chat","kind":"model"}}},"surfaceOp":"append"}`},
		{"a legacy tool/result", at(ev(wire.TypeToolResult, `{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"data"}],"isError":false}`), 6),
			`{"type":"tool/result","seq":6,"time":106,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:s:6","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"data"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}},"surfaceOp":"append"}`},
		{"a steering/message", at(ev(TypeLegacySteeringMessage, `{"turn":1,"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`), 1),
			`{"type":"user/message","seq":1,"time":101,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"legacy-message:s:1","role":"user"},"surfaceOp":"append"}`},
		{"a wrapped steering/message", at(ev(TypeLegacySteeringMessage, `{"turn":1,"message":{"id":"u1","role":"user","content":[],"source":{"kind":"user"}}}`), 1),
			`{"type":"user/message","seq":1,"time":101,"data":{"id":"u1","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`},
		{"a current event", at(ev(wire.TypeToolResult, okResult), 6),
			`{"type":"tool/result","seq":6,"time":106,"data":` + okResult + `,"surfaceOp":"append"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := HarnessUpgrader{SessionID: "s"}
			out, err := u.Upgrade(c.in)
			require.NoError(t, err)
			assert.Equal(t, c.want, encodeLine(t, out))
		})
	}
}

// TestHarnessUpgraderInheritsReplacedID: a legacy tool/result that replaces
// another takes the message id of the replaced one; one that replaces an
// event without a message id has none and is refused.
func TestHarnessUpgraderInheritsReplacedID(t *testing.T) {
	u := HarnessUpgrader{SessionID: "s"}
	first := ev(wire.TypeToolResult, `{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"long"}],"isError":false}`)
	first.Seq = 0
	_, err := u.Upgrade(first)
	require.NoError(t, err)
	_, err = u.Upgrade(Event{Type: wire.TypeTurnStart, Seq: 1, Data: []byte(`{"turn":2}`)})
	require.NoError(t, err)

	second := ev(wire.TypeToolResult, `{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"short"}],"isError":false}`)
	second.Seq, second.Time = 2, 102
	second.SurfaceOp, second.SourceEventSeqs = &SurfaceOp{Op: SurfaceReplace, StartSeq: 0, EndSeq: 0, Spelling: SpellingV0}, []int64{0}
	out, err := u.Upgrade(second)
	require.NoError(t, err)
	assert.Equal(t, `{"type":"tool/result","seq":2,"time":102,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:s:0","role":"user",`+
		`"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"short"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}},`+
		`"surfaceOp":{"op":"replace","start":0,"end":0},"sourceEventSeqs":[0]}`, encodeLine(t, out))

	third := second
	third.Seq = 3
	third.SurfaceOp = &SurfaceOp{Op: SurfaceReplace, StartSeq: 1, EndSeq: 1, Spelling: SpellingV0}
	_, err = u.Upgrade(third)
	require.EqualError(t, err, `event does not have the shape the harness reads: "tool/result" event at seq 3: data.message is not a message with a non-empty string id`)
}

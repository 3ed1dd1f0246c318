package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/sessionflow/sessionflow/wire"
)

// HarnessUpgrader reads the events of a log, in order, the way the published
// harness's load does before it validates them
// (@deepseek-ai/dsh-session-persistence: adoptStoredEvents and its
// migrateLegacy* steps): events written in a shape older harnesses wrote are
// upgraded in memory to the current shape, then every event is checked with
// CheckHarnessEvent. The upgrades:
//   - turn/start {turn, trigger} becomes {turn};
//   - turn/end with reason {kind:"aborted"} becomes {kind:"aborted",
//     reason:{kind:"legacy"}}, {kind:"disposed"} becomes {kind:"aborted",
//     reason:{kind:"disposed"}}, and {kind:"error", step, failure} or
//     {kind:"error", step, message, code?} becomes {kind:"error", error}
//     (code "UNKNOWN" when absent);
//   - steering/message becomes a user/message: {turn, message} its message,
//     {turn, content, source} a message with a legacy id;
//   - a user/message without id, role and message but with content and
//     source gets a legacy id and the role "user";
//   - an assistant/message {content, provenance, ...} becomes {...,
//     message:{id, role:"assistant", content, source:{...provenance,
//     kind:"model"}}};
//   - a tool/result {callId, content, isError, ...} becomes {..., message:{id,
//     role:"user", content:[{type:"tool-result", toolCallId, content,
//     isError}], source:{kind:"tool", callId}}}, whose id is, for a
//     replacement, the message id of the replaced node's start event.
//
// A legacy id is "legacy-message:<session id>:<seq>". Keys keep the order the
// harness gives them. The zero value with SessionID set is ready to use; it
// is not safe for concurrent use.
type HarnessUpgrader struct {
	// SessionID is the id of the session whose log is read.
	SessionID string
	// ids maps the seq of each event carrying a message id to that id.
	ids map[int64]string
}

// Upgrade returns e in its current shape (e itself when it is already
// current) after checking it with CheckHarnessEvent. Events must come in log
// order; an event refused leaves the upgrader unchanged.
func (u *HarnessUpgrader) Upgrade(e Event) (Event, error) {
	out, err := u.upgrade(e)
	if err != nil {
		return Event{}, fmt.Errorf("%w: %q event at seq %d: %w", ErrHarnessShape, e.Type, e.Seq, err)
	}
	if err := CheckHarnessEvent(out); err != nil {
		return Event{}, err
	}
	if id, ok := messageIDOf(out); ok {
		if u.ids == nil {
			u.ids = map[int64]string{}
		}
		u.ids[out.Seq] = id
	}
	return out, nil
}

// upgrade computes the current shape of e.
func (u *HarnessUpgrader) upgrade(e Event) (Event, error) {
	switch e.Type {
	case wire.TypeTurnStart, wire.TypeTurnEnd, TypeLegacySteeringMessage, wire.TypeUserMessage, wire.TypeAssistantMessage, wire.TypeToolResult:
	default:
		return e, nil
	}
	v, err := parseJSValue(e.Data)
	if err != nil {
		return Event{}, fmt.Errorf("data: %w", err)
	}
	data, _ := v.(map[string]any)
	if data == nil {
		return e, nil
	}
	canon, err := CanonicalJSON(e.Data)
	if err != nil {
		return Event{}, fmt.Errorf("data: %w", err)
	}
	members := rawMembers(canon)
	out := e
	switch e.Type {
	case wire.TypeTurnStart:
		if _, ok := data["trigger"]; !ok {
			return e, nil
		}
		if _, err := upgradeTurnStart(data); err != nil {
			return Event{}, err
		}
		out.Data = buildObject(members.only("turn"))
		return out, nil
	case wire.TypeTurnEnd:
		reason, err := upgradeTurnEnd(data, members.get("reason"))
		if err != nil || reason == nil {
			return e, err
		}
		out.Data = buildObject(members.replace("reason", reason))
		return out, nil
	}
	legacyID := "legacy-message:" + u.SessionID + ":" + strconv.FormatInt(e.Seq, 10)
	typ, _, err := upgradeSteering(e.Type, data, legacyID)
	if err != nil {
		return Event{}, err
	}
	if typ != e.Type { // a steering/message, now a user/message
		out.Type = typ
		if _, wrapped := data["message"].(map[string]any); wrapped {
			out.Data = json.RawMessage(members.get("message"))
			data, _ = data["message"].(map[string]any)
			members = rawMembers(out.Data)
		} else {
			out.Data = buildObject(append(members.without("turn"),
				rawMember{"id", quote(legacyID)}, rawMember{"role", quote("user")}))
			return out, nil
		}
	}
	switch legacyMessageShape(typ, data) {
	case wire.TypeUserMessage:
		out.Data = buildObject(append(members.without(),
			rawMember{"id", quote(legacyID)}, rawMember{"role", quote("user")}))
	case wire.TypeAssistantMessage:
		source := rawMembers(nil)
		if _, ok := data["provenance"].(map[string]any); ok {
			source = rawMembers(members.get("provenance"))
		}
		if source.get("kind") != nil {
			source = source.replace("kind", quote("model"))
		} else {
			source = append(source, rawMember{"kind", quote("model")})
		}
		msg := buildObject([]rawMember{{"id", quote(legacyID)}, {"role", quote("assistant")},
			{"content", members.get("content")}, {"source", buildObject(source)}})
		out.Data = buildObject(append(members.without("content", "provenance"), rawMember{"message", msg}))
	case wire.TypeToolResult:
		msg := []rawMember{{"id", quote(legacyID)}}
		if op := e.SurfaceOp; op != nil && op.Op == SurfaceReplace {
			msg = nil
			if id, ok := u.ids[op.StartSeq]; ok {
				msg = []rawMember{{"id", quote(id)}}
			}
		}
		block := buildObject([]rawMember{{"type", quote("tool-result")}, {"toolCallId", members.get("callId")},
			{"content", members.get("content")}, {"isError", members.get("isError")}})
		msg = append(msg, rawMember{"role", quote("user")}, rawMember{"content", append(append([]byte("["), block...), ']')},
			rawMember{"source", buildObject([]rawMember{{"kind", quote("tool")}, {"callId", members.get("callId")}})})
		out.Data = buildObject(append(members.without("callId", "content", "isError"), rawMember{"message", buildObject(msg)}))
	}
	return out, nil
}

// legacyMessageShape returns typ when data is a message event of type typ in
// the legacy shape the harness upgrades, "" otherwise.
func legacyMessageShape(typ string, data map[string]any) string {
	has := func(k string) bool { _, ok := data[k]; return ok }
	switch typ {
	case wire.TypeUserMessage:
		if !has("id") && !has("role") && !has("message") && has("content") && has("source") {
			return typ
		}
	case wire.TypeAssistantMessage:
		if !has("message") && has("content") && has("provenance") {
			return typ
		}
	case wire.TypeToolResult:
		if !has("message") && has("callId") && has("content") && has("isError") {
			return typ
		}
	}
	return ""
}

// upgradeMessageData returns the data of a message event of type typ in its
// current shape, with id as the message id a legacy shape gets, for the
// checks of CheckHarnessEvent (key order does not matter there).
func upgradeMessageData(typ string, data map[string]any, id string, op *SurfaceOp) map[string]any {
	shape := legacyMessageShape(typ, data)
	if shape == "" {
		return data
	}
	out := make(map[string]any, len(data)+2)
	for k, v := range data {
		out[k] = v
	}
	switch shape {
	case wire.TypeUserMessage:
		out["id"], out["role"] = id, "user"
	case wire.TypeAssistantMessage:
		source := map[string]any{}
		if p, ok := data["provenance"].(map[string]any); ok {
			for k, v := range p {
				source[k] = v
			}
		}
		source["kind"] = "model"
		delete(out, "content")
		delete(out, "provenance")
		out["message"] = map[string]any{"id": id, "role": "assistant", "content": data["content"], "source": source}
	case wire.TypeToolResult:
		delete(out, "callId")
		delete(out, "content")
		delete(out, "isError")
		out["message"] = map[string]any{"id": id, "role": "user",
			"content": []any{map[string]any{"type": "tool-result", "toolCallId": data["callId"], "content": data["content"], "isError": data["isError"]}},
			"source":  map[string]any{"kind": "tool", "callId": data["callId"]}}
	}
	return out
}

// upgradeTurnStart checks a turn/start holding the legacy trigger (data
// without one passes) and returns its turn.
func upgradeTurnStart(data map[string]any) (any, error) {
	if _, ok := data["trigger"]; !ok {
		return nil, nil
	}
	trigger, _ := data["trigger"].(map[string]any)
	kind, _ := trigger["kind"].(string)
	if !safeCount(data["turn"], 1) || !onlyKeys(data, []string{"turn", "trigger"}) || kind == "" {
		return nil, errors.New("a legacy turn/start must be exactly {turn, trigger} with turn >= 1 and a trigger kind")
	}
	return data["turn"], nil
}

var errTurnEnd = errors.New("a turn/end must be exactly {turn, reason} with turn >= 1, reason.kind a string, and the fields its kind calls for")

// upgradeTurnEnd checks a turn/end and returns the reason of a legacy form,
// nil when the reason is current; rawReason is the canonical reason, from
// which a legacy error's failure is copied as stored (nil when only the
// check matters).
func upgradeTurnEnd(data map[string]any, rawReason []byte) ([]byte, error) {
	if data == nil {
		return nil, nil // the harness does not look into a non-object
	}
	reason, _ := data["reason"].(map[string]any)
	kind, isString := reason["kind"].(string)
	if !safeCount(data["turn"], 1) || !onlyKeys(data, []string{"turn", "reason"}) || reason == nil || !isString {
		return nil, errTurnEnd
	}
	has := func(k string) bool { _, ok := reason[k]; return ok }
	switch kind {
	case "completed", "blocked", "max-tokens", "interrupted":
		if !onlyKeys(reason, []string{"kind"}) {
			return nil, errTurnEnd
		}
		return nil, nil
	case "aborted", "disposed":
		if kind == "aborted" && has("reason") {
			return nil, nil
		}
		if !onlyKeys(reason, []string{"kind"}) {
			return nil, errTurnEnd
		}
		inner := "legacy"
		if kind == "disposed" {
			inner = "disposed"
		}
		return []byte(`{"kind":"aborted","reason":{"kind":"` + inner + `"}}`), nil
	case "error":
		if has("error") {
			return nil, nil
		}
		return legacyTurnError(reason, rawReason)
	}
	return nil, nil
}

// legacyTurnError upgrades the reason of a legacy turn/end of kind error.
func legacyTurnError(reason map[string]any, rawReason []byte) ([]byte, error) {
	if !safeCount(reason["step"], 0) {
		return nil, errTurnEnd
	}
	if failure, ok := reason["failure"].(map[string]any); ok && onlyKeys(reason, []string{"kind", "step", "failure"}) &&
		onlyKeys(failure, []string{"message", "code"}, "status", "providerRetryAfterMs", "requestId") &&
		isType[string](failure["message"]) && isType[string](failure["code"]) &&
		optional(failure, "status", isJSNumber) && optional(failure, "providerRetryAfterMs", isJSNumber) &&
		optional(failure, "requestId", isType[string]) {
		return buildObject([]rawMember{{"kind", quote("error")}, {"error", rawMembers(rawReason).get("failure")}}), nil
	}
	code, hasCode := reason["code"]
	keys := []string{"kind", "step", "message"}
	if hasCode {
		keys = append(keys, "code")
	}
	msg, isString := reason["message"].(string)
	if !onlyKeys(reason, keys) || !isString || (hasCode && !isType[string](code)) {
		return nil, errTurnEnd
	}
	c, _ := code.(string)
	if !hasCode {
		c = "UNKNOWN"
	}
	return []byte(`{"kind":"error","error":{"message":` + string(quote(msg)) + `,"code":` + string(quote(c)) + `}}`), nil
}

// upgradeSteering checks a steering/message and returns the type and data of
// the user/message it becomes (id names a message that has none); other
// events pass unchanged.
func upgradeSteering(typ string, data map[string]any, id string) (string, map[string]any, error) {
	if typ != TypeLegacySteeringMessage {
		return typ, data, nil
	}
	errSteering := errors.New("a steering/message must be {turn, message} or {turn, content, source}")
	if data == nil {
		return "", nil, errSteering
	}
	if msg, ok := data["message"].(map[string]any); ok && safeCount(data["turn"], -wire.MaxSafeInteger) && onlyKeys(data, []string{"turn", "message"}) {
		return wire.TypeUserMessage, msg, nil
	}
	if !safeCount(data["turn"], -wire.MaxSafeInteger) || !onlyKeys(data, []string{"turn", "content", "source"}) {
		return "", nil, errSteering
	}
	out := map[string]any{"content": data["content"], "source": data["source"], "id": id, "role": "user"}
	return wire.TypeUserMessage, out, nil
}

// messageIDOf returns the message id the harness records for an event: the
// string id of a user/message's data, or of any other event's data.message.
func messageIDOf(e Event) (string, bool) {
	if e.Type != wire.TypeUserMessage && !bytes.Contains(e.Data, []byte(`"message"`)) {
		return "", false
	}
	v, err := parseJSValue(e.Data)
	if err != nil {
		return "", false
	}
	m, _ := v.(map[string]any)
	if e.Type != wire.TypeUserMessage {
		m, _ = m["message"].(map[string]any)
	}
	id, ok := m["id"].(string)
	return id, ok
}

func isType[T any](v any) bool { _, ok := v.(T); return ok }

func isJSNumber(v any) bool { _, ok := jsNumber(v); return ok }

// optional reports whether m lacks k or holds a value of it that passes ok.
func optional(m map[string]any, k string, ok func(any) bool) bool {
	v, has := m[k]
	return !has || ok(v)
}

// rawMember is one member of a canonical JSON object: its key, unescaped,
// and its value as canonical JSON.
type rawMember struct {
	key string
	val []byte
}

// rawMemberList is the members of a canonical JSON object, in order.
type rawMemberList []rawMember

// rawMembers lists the members of a canonical JSON object (nil or a
// non-object gives none).
func rawMembers(canon []byte) rawMemberList {
	if len(canon) == 0 || canon[0] != '{' {
		return nil
	}
	var out rawMemberList
	for _, m := range splitCanonicalObject(canon) {
		k, err := unquoteCanonical(canon[m.keyStart:m.keyEnd])
		if err != nil {
			continue
		}
		out = append(out, rawMember{k, canon[m.start:m.end]})
	}
	return out
}

// get returns the value of key k, nil when absent.
func (l rawMemberList) get(k string) []byte {
	for _, m := range l {
		if m.key == k {
			return m.val
		}
	}
	return nil
}

// only returns the members whose key is one of keys, in order.
func (l rawMemberList) only(keys ...string) rawMemberList {
	var out rawMemberList
	for _, m := range l {
		for _, k := range keys {
			if m.key == k {
				out = append(out, m)
			}
		}
	}
	return out
}

// without returns a copy of the members whose key is none of keys.
func (l rawMemberList) without(keys ...string) rawMemberList {
	out := make(rawMemberList, 0, len(l))
	for _, m := range l {
		drop := false
		for _, k := range keys {
			drop = drop || m.key == k
		}
		if !drop {
			out = append(out, m)
		}
	}
	return out
}

// replace returns a copy with the value of key k set to v, in place.
func (l rawMemberList) replace(k string, v []byte) rawMemberList {
	out := append(rawMemberList(nil), l...)
	for i := range out {
		if out[i].key == k {
			out[i].val = v
		}
	}
	return out
}

// buildObject renders members as a canonical JSON object.
func buildObject(ms []rawMember) json.RawMessage {
	out := []byte{'{'}
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, m.key)
		out = append(out, ':')
		out = append(out, m.val...)
	}
	return append(out, '}')
}

// quote renders s as a canonical JSON string.
func quote(s string) []byte { return appendString(nil, s) }

package session

import (
	"errors"
	"fmt"
	"math"

	"github.com/sessionflow/sessionflow/wire"
)

// Event types the published harness refuses on load: it no longer knows how
// to replay them.
const (
	// TypeLegacyRequestHeaderDelta is the request-header delta of old logs.
	TypeLegacyRequestHeaderDelta = "request/header-delta"
	// TypeLegacyModeSet is the mode change of old logs.
	TypeLegacyModeSet = "mode/set"
	// TypeLegacySteeringMessage is the steering message of old logs, read as
	// a user/message.
	TypeLegacySteeringMessage = "steering/message"
)

// ErrHarnessShape is matched (errors.Is) by every refusal of
// CheckHarnessEvent and HarnessUpgrader.Upgrade.
var ErrHarnessShape = errors.New("event does not have the shape the harness reads")

// CheckHarnessEvent applies to one stored event the checks the published
// DeepSeek Harness makes of every event when it loads a log
// (@deepseek-ai/dsh-session: assertSessionEventEnvelope,
// assertCurrentLlmShape, assertMessageEventShape; @deepseek-ai/dsh-session-
// persistence: assertSupportedEvents and the checks of its legacy upgrades):
//   - seq is a non-negative safe integer and time a safe integer, negative
//     allowed;
//   - request/header-delta and mode/set are refused, and so is a
//     request/header whose data.reason is "fallback";
//   - a request/header carries data.header.config with non-empty string
//     provider and model, a non-empty string reasoningEffort when it has
//     one, and adapterDefaults, when present, an object whose keys are only
//     reasoningEffort and maxTokens, each true and each set in config;
//   - a user/message's data, and the data.message of an assistant/message
//     or a tool/result, is a message with a non-empty string id, the role
//     "user" ("assistant" for an assistant/message), a source whose kind is
//     a non-empty string and a content array; an assistant/message's source
//     is {kind:"model"} with non-empty string provider and model, and no
//     block of its content is null (the harness's repair scan reads the type
//     of each); a tool/result's source is {kind:"tool"} with a non-empty
//     string callId, and its content is exactly one tool-result block with a
//     content array and the toolCallId of the source;
//   - a turn/end's data is exactly {turn, reason} with turn a safe integer
//     >= 1 and reason an object with a string kind; the kinds completed,
//     blocked, max-tokens and interrupted carry nothing else, and the legacy
//     forms the harness upgrades (aborted without reason, disposed, error
//     without error) must be well formed;
//   - a turn/start holding the legacy trigger is exactly {turn, trigger}
//     with turn a safe integer >= 1 and trigger an object with a non-empty
//     string kind; a steering/message has one of its two legacy forms.
//
// A message event stored in a legacy shape the harness upgrades on load
// (see HarnessUpgrader) is checked in its upgraded shape; a legacy tool/result
// that replaces another is assumed to inherit that one's message id. The
// refusals match ErrHarnessShape and name the event's type and seq.
func CheckHarnessEvent(e Event) error {
	if err := checkHarnessEvent(e); err != nil {
		return fmt.Errorf("%w: %q event at seq %d: %w", ErrHarnessShape, e.Type, e.Seq, err)
	}
	return nil
}

func checkHarnessEvent(e Event) error {
	if e.Seq < 0 || e.Seq > wire.MaxSafeInteger {
		return fmt.Errorf("seq %d is not a non-negative safe integer", e.Seq)
	}
	if e.Time < -wire.MaxSafeInteger || e.Time > wire.MaxSafeInteger {
		return fmt.Errorf("time %d is not a safe integer", e.Time)
	}
	switch e.Type {
	case TypeLegacyRequestHeaderDelta, TypeLegacyModeSet:
		return errors.New("the legacy type is no longer supported")
	case wire.TypeRequestHeader, wire.TypeTurnStart, wire.TypeTurnEnd, TypeLegacySteeringMessage,
		wire.TypeUserMessage, wire.TypeAssistantMessage, wire.TypeToolResult:
	default:
		return nil
	}
	v, err := parseJSValue(e.Data)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	data, _ := v.(map[string]any)
	switch e.Type {
	case wire.TypeRequestHeader:
		return checkRequestHeader(data)
	case wire.TypeTurnStart:
		_, err := upgradeTurnStart(data)
		return err
	case wire.TypeTurnEnd:
		_, err := upgradeTurnEnd(data, nil)
		return err
	}
	typ, data, err := upgradeSteering(e.Type, data, "legacy")
	if err != nil {
		return err
	}
	data = upgradeMessageData(typ, data, "legacy", e.SurfaceOp)
	return checkMessageShape(typ, data)
}

// checkRequestHeader checks a request/header's data (nil when it is not an
// object).
func checkRequestHeader(data map[string]any) error {
	if data != nil && data["reason"] == "fallback" {
		return errors.New(`the legacy reason "fallback" is no longer supported`)
	}
	header, _ := data["header"].(map[string]any)
	config, _ := header["config"].(map[string]any)
	if !hasProviderModel(config) {
		return errors.New("data.header.config lacks a non-empty provider and model")
	}
	if effort, ok := config["reasoningEffort"]; ok {
		if s, isString := effort.(string); !isString || s == "" {
			return errors.New("data.header.config.reasoningEffort is not a non-empty string")
		}
	}
	defaults, ok := header["adapterDefaults"]
	if !ok {
		return nil
	}
	m, isObject := defaults.(map[string]any)
	if !isObject {
		return errors.New("data.header.adapterDefaults is not an object")
	}
	for k, v := range m {
		if (k != "reasoningEffort" && k != "maxTokens") || v != true {
			return fmt.Errorf("data.header.adapterDefaults has %q, not a true reasoningEffort or maxTokens", k)
		}
		if _, set := config[k]; !set {
			return fmt.Errorf("data.header.adapterDefaults marks %s, which config does not set", k)
		}
	}
	return nil
}

// hasProviderModel reports whether m has non-empty string provider and model.
func hasProviderModel(m map[string]any) bool {
	p, _ := m["provider"].(string)
	mo, _ := m["model"].(string)
	return p != "" && mo != ""
}

// checkMessageShape checks the message of a user/message, assistant/message
// or tool/result whose data (nil when not an object) is in its current shape.
func checkMessageShape(typ string, data map[string]any) error {
	msg := data
	where := "data"
	if typ != wire.TypeUserMessage {
		msg, _ = data["message"].(map[string]any)
		where = "data.message"
	}
	if id, _ := msg["id"].(string); id == "" {
		return fmt.Errorf("%s is not a message with a non-empty string id", where)
	}
	role := "user"
	if typ == wire.TypeAssistantMessage {
		role = "assistant"
	}
	if msg["role"] != role {
		return fmt.Errorf("%s.role is not %q", where, role)
	}
	source, _ := msg["source"].(map[string]any)
	if kind, _ := source["kind"].(string); kind == "" {
		return fmt.Errorf("%s.source is not an object with a non-empty string kind", where)
	}
	content, isArray := msg["content"].([]any)
	if !isArray {
		return fmt.Errorf("%s.content is not an array", where)
	}
	switch typ {
	case wire.TypeAssistantMessage:
		if source["kind"] != "model" || !hasProviderModel(source) {
			return fmt.Errorf(`%s.source is not {kind:"model"} with a non-empty provider and model`, where)
		}
		for i, b := range content {
			if b == nil {
				return fmt.Errorf("%s.content[%d] is null", where, i)
			}
		}
	case wire.TypeToolResult:
		callID, _ := source["callId"].(string)
		if source["kind"] != "tool" || callID == "" {
			return fmt.Errorf(`%s.source is not {kind:"tool"} with a non-empty string callId`, where)
		}
		var block map[string]any
		if len(content) == 1 {
			block, _ = content[0].(map[string]any)
		}
		if _, ok := block["content"].([]any); !ok || block["type"] != "tool-result" {
			return fmt.Errorf("%s.content is not exactly one tool-result block with a content array", where)
		}
		if block["toolCallId"] != callID {
			return fmt.Errorf("%s.content[0].toolCallId is not the source's callId %q", where, callID)
		}
	}
	return nil
}

// safeCount reports whether v is a number that is a safe integer >= min.
func safeCount(v any, min float64) bool {
	f, ok := jsNumber(v)
	return ok && f == math.Trunc(f) && math.Abs(f) <= wire.MaxSafeInteger && f >= min
}

// onlyKeys reports whether m has every key of required and no key outside
// required and optional.
func onlyKeys(m map[string]any, required []string, optional ...string) bool {
	for _, k := range required {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	for k := range m {
		allowed := false
		for _, a := range required {
			allowed = allowed || a == k
		}
		for _, a := range optional {
			allowed = allowed || a == k
		}
		if !allowed {
			return false
		}
	}
	return true
}

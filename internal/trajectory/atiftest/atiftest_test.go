package atiftest

import (
	"strings"
	"testing"
)

// Each document breaks one rule of Harbor's models; a valid one passes.
func TestValidate(t *testing.T) {
	ok := `{"schema_version":"ATIF-v1.8","session_id":"s","trajectory_id":"t","agent":{"name":"a","version":"1"},"steps":[
		{"step_id":1,"source":"user","message":"go","timestamp":"2026-01-02T03:04:05.5Z"},
		{"step_id":2,"source":"agent","message":"","tool_calls":[{"tool_call_id":"c1","function_name":"f","arguments":{}}],
		 "observation":{"results":[{"source_call_id":"c1","content":"x","subagent_trajectory_ref":[{"trajectory_id":"t/sub"}]}]},
		 "metrics":{"prompt_tokens":10,"completion_tokens":2,"cached_tokens":4},"llm_call_count":1}],
		"final_metrics":{"total_prompt_tokens":10,"total_cached_tokens":4,"total_steps":2},
		"subagent_trajectories":[{"schema_version":"ATIF-v1.7","trajectory_id":"t/sub","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"user","message":[{"type":"text","text":"hi"}]}]}]}`
	if errs := Validate([]byte(ok)); len(errs) > 0 {
		t.Fatalf("a valid document fails: %v", errs)
	}
	tests := []struct{ name, from, to, want string }{
		{"step ids not sequential", `{"step_id":2,"source":"agent"`, `{"step_id":3,"source":"agent"`, "sequential"},
		{"unknown version", `"ATIF-v1.8"`, `"ATIF-v2.0"`, "is not one of"},
		{"source_call_id of another step", `"source_call_id":"c1"`, `"source_call_id":"c9"`, "not a tool_call_id of this step"},
		{"duplicate tool_call_id", `"arguments":{}}]`, `"arguments":{}},{"tool_call_id":"c1","function_name":"g","arguments":{}}]`, "duplicate"},
		{"metrics closed", `"cached_tokens":4}`, `"cached_tokens":4,"cache_tokens":1}`, "unknown key"},
		{"metrics on a user step", `"message":"go",`, `"message":"go","metrics":{},`, "only applicable when source is agent"},
		{"content part with a source", `{"type":"text","text":"hi"}`, `{"type":"text","text":"hi","source":{"media_type":"image/png","path":"a"}}`, "has no source"},
		{"embedded without trajectory_id", `"trajectory_id":"t/sub",`, ``, "required for an embedded subagent"},
		{"unresolved ref", `"subagent_trajectory_ref":[{"trajectory_id":"t/sub"}]`, `"subagent_trajectory_ref":[{"trajectory_id":"t/none"}]`, "not in subagent_trajectories"},
		{"ref without a key", `"subagent_trajectory_ref":[{"trajectory_id":"t/sub"}]`, `"subagent_trajectory_ref":[{"session_id":"s"}]`, "neither trajectory_id nor trajectory_path"},
		{"arguments not an object", `"arguments":{}`, `"arguments":"{}"`, "not an object"},
		{"timestamp not ISO 8601", `"2026-01-02T03:04:05.5Z"`, `"yesterday"`, "ISO 8601"},
		{"no steps", `"steps":[{"step_id":1,"source":"user","message":[{"type":"text","text":"hi"}]}]`, `"steps":[]`, "min_length"},
		{"trajectory_id not a string", `"trajectory_id":"t","agent"`, `"trajectory_id":7,"agent"`, "not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(ok, tt.from, tt.to, 1)
			if doc == ok {
				t.Fatal("the replacement changed nothing")
			}
			errs := Validate([]byte(doc))
			if !strings.Contains(strings.Join(errs, "\n"), tt.want) {
				t.Errorf("errors %v, want one with %q", errs, tt.want)
			}
		})
	}
}

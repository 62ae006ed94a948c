// Package atiftest checks ATIF documents and Harbor trial directories
// against the rules of Harbor's own models, for tests: an independent
// reading of the format, not the exporter's types.
//
// Every rule below names the model it comes from: harbor-framework/harbor,
// src/harbor/models/trajectories/{trajectory,agent,step,tool_call,
// observation,observation_result,subagent_trajectory_ref,metrics,
// final_metrics,content}.py (ATIF-v1.8, whose Trajectory.schema_version
// Literal lists v1.0 to v1.8 and defaults to v1.8), and
// src/harbor/models/trial/result.py (TrialResult). Models with
// model_config {"extra": "forbid"} refuse unknown keys; a field typed
// "X | None" accepts null or absence.
package atiftest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Versions are Trajectory.schema_version's Literal values.
var Versions = []string{"ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.2", "ATIF-v1.3", "ATIF-v1.4", "ATIF-v1.5", "ATIF-v1.6", "ATIF-v1.7", "ATIF-v1.8"}

type obj = map[string]any

type checker struct{ errs []string }

func (c *checker) fail(path, f string, a ...any) {
	c.errs = append(c.errs, path+": "+fmt.Sprintf(f, a...))
}

// Validate checks one trajectory document; it returns every violation.
func Validate(raw []byte) []string {
	var v any
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	c := &checker{}
	c.trajectory("$", v, false)
	return c.errs
}

// fields checks o is an object with only the keys allowed (extra forbid)
// and the required ones present and not null.
func (c *checker) fields(path string, v any, allowed, required []string) obj {
	o, ok := v.(obj)
	if !ok {
		c.fail(path, "not an object")
		return nil
	}
	for k := range o {
		if !slices.Contains(allowed, k) {
			c.fail(path, "unknown key %q (extra forbid)", k)
		}
	}
	for _, k := range required {
		if o[k] == nil {
			c.fail(path, "%q is required", k)
		}
	}
	return o
}

func (c *checker) str(path string, v any, nullable bool) (string, bool) {
	if v == nil {
		if !nullable {
			c.fail(path, "null")
		}
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		c.fail(path, "not a string")
	}
	return s, ok
}

// integer: pydantic's int (a JSON number without a fraction), with a
// lower bound when ge is set.
func (c *checker) integer(path string, v any, ge *int64) {
	if v == nil {
		return
	}
	n, ok := v.(json.Number)
	if !ok {
		c.fail(path, "not a number")
		return
	}
	i, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) {
			c.fail(path, "not an integer: %s", n)
			return
		}
		i = int64(f)
	}
	if ge != nil && i < *ge {
		c.fail(path, "%d < %d", i, *ge)
	}
}

func (c *checker) number(path string, v any, ge bool) {
	if v == nil {
		return
	}
	n, ok := v.(json.Number)
	if !ok {
		c.fail(path, "not a number")
		return
	}
	if f, _ := n.Float64(); ge && f < 0 {
		c.fail(path, "negative")
	}
}

func (c *checker) dict(path string, v any) {
	if v == nil {
		return
	}
	if _, ok := v.(obj); !ok {
		c.fail(path, "not an object (dict[str, Any])")
	}
}

func (c *checker) list(path string, v any) []any {
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		c.fail(path, "not an array")
	}
	return l
}

var zero, one int64 = 0, 1

// trajectory: trajectory.py's Trajectory.
func (c *checker) trajectory(path string, v any, embedded bool) {
	o := c.fields(path, v, []string{"schema_version", "session_id", "trajectory_id", "agent", "steps", "notes", "final_metrics",
		"continued_trajectory_ref", "extra", "subagent_trajectories"}, []string{"agent", "steps"})
	if o == nil {
		return
	}
	// schema_version: Literal["ATIF-v1.0", …, "ATIF-v1.8"], default v1.8.
	if sv, ok := o["schema_version"]; ok {
		if s, _ := c.str(path+".schema_version", sv, false); !slices.Contains(Versions, s) {
			c.fail(path+".schema_version", "%q is not one of %v", s, Versions)
		}
	}
	c.str(path+".session_id", o["session_id"], true)
	id, _ := c.str(path+".trajectory_id", o["trajectory_id"], true)
	// trajectory_id: "REQUIRED on any trajectory embedded in a parent's
	// subagent_trajectories array".
	if embedded && id == "" {
		c.fail(path+".trajectory_id", "required for an embedded subagent")
	}
	c.str(path+".notes", o["notes"], true)
	c.str(path+".continued_trajectory_ref", o["continued_trajectory_ref"], true)
	c.dict(path+".extra", o["extra"])
	c.agent(path+".agent", o["agent"])
	steps := c.list(path+".steps", o["steps"])
	// steps: min_length=1.
	if len(steps) == 0 {
		c.fail(path+".steps", "at least one step (min_length=1)")
	}
	for i, s := range steps {
		p := fmt.Sprintf("%s.steps[%d]", path, i)
		c.step(p, s)
		// validate_step_ids: step_id == index + 1.
		if so, ok := s.(obj); ok {
			if n, ok := so["step_id"].(json.Number); !ok || n.String() != fmt.Sprint(i+1) {
				c.fail(p+".step_id", "expected %d (sequential from 1), got %v", i+1, so["step_id"])
			}
		}
	}
	if fm := o["final_metrics"]; fm != nil {
		c.finalMetrics(path+".final_metrics", fm)
	}
	// validate_embedded_subagent_trajectory_ids: every embedded subagent
	// has a trajectory_id, unique in the array; a ref without
	// trajectory_path names one of them.
	seen := map[string]bool{}
	for i, s := range c.list(path+".subagent_trajectories", o["subagent_trajectories"]) {
		p := fmt.Sprintf("%s.subagent_trajectories[%d]", path, i)
		c.trajectory(p, s, true)
		if so, ok := s.(obj); ok {
			tid, _ := so["trajectory_id"].(string)
			if seen[tid] {
				c.fail(p+".trajectory_id", "%q is not unique within subagent_trajectories", tid)
			}
			seen[tid] = true
		}
	}
	for i, s := range steps {
		so, _ := s.(obj)
		ob, _ := so["observation"].(obj)
		for j, r := range c.listQuiet(ob["results"]) {
			ro, _ := r.(obj)
			for k, ref := range c.listQuiet(ro["subagent_trajectory_ref"]) {
				rf, _ := ref.(obj)
				if p, _ := rf["trajectory_path"].(string); p != "" {
					continue
				}
				if tid, _ := rf["trajectory_id"].(string); !seen[tid] {
					c.fail(fmt.Sprintf("%s.steps[%d].observation.results[%d].subagent_trajectory_ref[%d]", path, i, j, k),
						"trajectory_id %q is not in subagent_trajectories", tid)
				}
			}
		}
	}
}

func (c *checker) listQuiet(v any) []any { l, _ := v.([]any); return l }

// agent: agent.py's Agent.
func (c *checker) agent(path string, v any) {
	o := c.fields(path, v, []string{"name", "version", "model_name", "tool_definitions", "extra"}, []string{"name", "version"})
	if o == nil {
		return
	}
	c.str(path+".name", o["name"], false)
	c.str(path+".version", o["version"], false)
	c.str(path+".model_name", o["model_name"], true)
	for i, d := range c.list(path+".tool_definitions", o["tool_definitions"]) {
		c.dict(fmt.Sprintf("%s.tool_definitions[%d]", path, i), d)
	}
	c.dict(path+".extra", o["extra"])
}

// step: step.py's Step.
func (c *checker) step(path string, v any) {
	o := c.fields(path, v, []string{"step_id", "timestamp", "source", "model_name", "reasoning_effort", "message", "reasoning_content",
		"tool_calls", "observation", "metrics", "is_copied_context", "llm_call_count", "extra"}, []string{"step_id", "source", "message"})
	if o == nil {
		return
	}
	c.integer(path+".step_id", o["step_id"], &one) // ge=1
	// validate_timestamp: datetime.fromisoformat(v.replace("Z", "+00:00")).
	if ts, ok := c.str(path+".timestamp", o["timestamp"], true); ok {
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			c.fail(path+".timestamp", "not ISO 8601: %q", ts)
		}
	}
	src, _ := c.str(path+".source", o["source"], false)
	if src != "system" && src != "user" && src != "agent" { // Literal["system", "user", "agent"]
		c.fail(path+".source", "%q is not system, user or agent", src)
	}
	c.str(path+".model_name", o["model_name"], true)
	if re := o["reasoning_effort"]; re != nil { // str | float
		if _, s := re.(string); !s {
			c.number(path+".reasoning_effort", re, false)
		}
	}
	c.content(path+".message", o["message"], false)
	c.str(path+".reasoning_content", o["reasoning_content"], true)
	if b := o["is_copied_context"]; b != nil {
		if _, ok := b.(bool); !ok {
			c.fail(path+".is_copied_context", "not a boolean")
		}
	}
	c.integer(path+".llm_call_count", o["llm_call_count"], &zero) // ge=0
	c.dict(path+".extra", o["extra"])
	// validate_tool_call_references: tool_call_ids unique in the step; a
	// result's source_call_id is one of them.
	ids := map[string]bool{}
	for i, tc := range c.list(path+".tool_calls", o["tool_calls"]) {
		p := fmt.Sprintf("%s.tool_calls[%d]", path, i)
		to := c.fields(p, tc, []string{"tool_call_id", "function_name", "arguments", "extra"}, []string{"tool_call_id", "function_name", "arguments"})
		if to == nil {
			continue
		}
		id, _ := c.str(p+".tool_call_id", to["tool_call_id"], false)
		if ids[id] {
			c.fail(p+".tool_call_id", "duplicate tool_call_id %q", id)
		}
		ids[id] = true
		c.str(p+".function_name", to["function_name"], false)
		if _, ok := to["arguments"].(obj); !ok { // dict[str, Any]
			c.fail(p+".arguments", "not an object")
		}
		c.dict(p+".extra", to["extra"])
	}
	if ob := o["observation"]; ob != nil {
		oo := c.fields(path+".observation", ob, []string{"results"}, []string{"results"})
		for i, r := range c.list(path+".observation.results", oo["results"]) {
			p := fmt.Sprintf("%s.observation.results[%d]", path, i)
			ro := c.fields(p, r, []string{"source_call_id", "content", "subagent_trajectory_ref"}, nil)
			if ro == nil {
				continue
			}
			if sid, ok := c.str(p+".source_call_id", ro["source_call_id"], true); ok && !ids[sid] {
				c.fail(p+".source_call_id", "%q is not a tool_call_id of this step", sid)
			}
			c.content(p+".content", ro["content"], true)
			for k, ref := range c.list(p+".subagent_trajectory_ref", ro["subagent_trajectory_ref"]) {
				rp := fmt.Sprintf("%s.subagent_trajectory_ref[%d]", p, k)
				rf := c.fields(rp, ref, []string{"trajectory_id", "session_id", "trajectory_path", "extra"}, nil)
				if rf == nil {
					continue
				}
				tid, _ := c.str(rp+".trajectory_id", rf["trajectory_id"], true)
				tp, _ := c.str(rp+".trajectory_path", rf["trajectory_path"], true)
				c.str(rp+".session_id", rf["session_id"], true)
				c.dict(rp+".extra", rf["extra"])
				// validate_is_resolvable.
				if strings.TrimSpace(tid) == "" && strings.TrimSpace(tp) == "" {
					c.fail(rp, "sets neither trajectory_id nor trajectory_path")
				}
			}
		}
	}
	if m := o["metrics"]; m != nil {
		c.metrics(path+".metrics", m)
	}
	// validate_agent_only_fields.
	if src != "agent" {
		for _, f := range []string{"model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"} {
			if o[f] != nil {
				c.fail(path+"."+f, "only applicable when source is agent, but source is %q", src)
			}
		}
	}
	// validate_llm_call_count_zero_fields.
	if n, ok := o["llm_call_count"].(json.Number); ok && n.String() == "0" && src == "agent" {
		for _, f := range []string{"metrics", "reasoning_content"} {
			if o[f] != nil {
				c.fail(path+"."+f, "must be absent when llm_call_count is 0")
			}
		}
	}
}

// metrics: metrics.py's Metrics.
func (c *checker) metrics(path string, v any) {
	o := c.fields(path, v, []string{"prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "prompt_token_ids",
		"completion_token_ids", "logprobs", "extra"}, nil)
	if o == nil {
		return
	}
	for _, f := range []string{"prompt_tokens", "completion_tokens", "cached_tokens"} {
		c.integer(path+"."+f, o[f], nil)
	}
	c.number(path+".cost_usd", o["cost_usd"], false)
	for _, f := range []string{"prompt_token_ids", "completion_token_ids"} {
		for i, x := range c.list(path+"."+f, o[f]) {
			c.integer(fmt.Sprintf("%s.%s[%d]", path, f, i), x, nil)
		}
	}
	for i, x := range c.list(path+".logprobs", o["logprobs"]) {
		c.number(fmt.Sprintf("%s.logprobs[%d]", path, i), x, false)
	}
	c.dict(path+".extra", o["extra"])
}

// finalMetrics: final_metrics.py's FinalMetrics.
func (c *checker) finalMetrics(path string, v any) {
	o := c.fields(path, v, []string{"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_cost_usd", "total_steps", "extra"}, nil)
	if o == nil {
		return
	}
	for _, f := range []string{"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens"} {
		c.integer(path+"."+f, o[f], nil)
	}
	c.number(path+".total_cost_usd", o["total_cost_usd"], false)
	c.integer(path+".total_steps", o["total_steps"], &zero)
	c.dict(path+".extra", o["extra"])
}

// content: str | list[ContentPart] (content.py), null where allowed.
func (c *checker) content(path string, v any, nullable bool) {
	switch x := v.(type) {
	case nil:
		if !nullable {
			c.fail(path, "null")
		}
	case string:
	case []any:
		for i, p := range x {
			pp := fmt.Sprintf("%s[%d]", path, i)
			po := c.fields(pp, p, []string{"type", "text", "source"}, []string{"type"})
			if po == nil {
				continue
			}
			switch typ, _ := po["type"].(string); typ {
			case "text": // validate_content_type
				if _, ok := po["text"].(string); !ok {
					c.fail(pp, "a text part needs text")
				}
				if po["source"] != nil {
					c.fail(pp, "a text part has no source")
				}
			case "image", "audio":
				if po["text"] != nil {
					c.fail(pp, "a %s part has no text", typ)
				}
				c.source(pp+".source", po["source"], typ)
			default:
				c.fail(pp+".type", "%q is not text, image or audio", typ)
			}
		}
	default:
		c.fail(path, "neither a string nor a list of content parts")
	}
}

// source: ImageSource or AudioSource, of the part's own kind.
func (c *checker) source(path string, v any, kind string) {
	allowed := []string{"media_type", "path"}
	if kind == "audio" {
		allowed = append(allowed, "duration_sec")
	}
	o := c.fields(path, v, allowed, []string{"media_type", "path"})
	if o == nil {
		return
	}
	mt, _ := c.str(path+".media_type", o["media_type"], false)
	c.str(path+".path", o["path"], false)
	images := []string{"image/jpeg", "image/png", "image/gif", "image/webp"}
	audio := []string{"audio/wav", "audio/mpeg", "audio/mp4", "audio/aac", "audio/ogg", "audio/flac", "audio/webm", "audio/aiff"}
	if kind == "image" && !slices.Contains(images, mt) || kind == "audio" && !slices.Contains(audio, strings.ToLower(mt)) {
		c.fail(path+".media_type", "%q is not a %s media type", mt, kind)
	}
	if kind == "audio" {
		c.number(path+".duration_sec", o["duration_sec"], true)
	}
}

// ValidateTrial checks a Harbor trial directory: result.json as
// TrialResult reads it (task_name, trial_name, trial_uri, task_id,
// task_checksum, config with config.task.path, agent_info with name and
// version are required; exception_info, when set, has its four fields;
// verifier_result.rewards maps names to numbers; times are ISO 8601),
// config.json as TrialConfig (task.path required), and
// agent/trajectory.json with every file its continued_trajectory_ref
// chain names, each a valid trajectory.
func ValidateTrial(dir string) []string {
	c := &checker{}
	read := func(name string) any {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			c.fail(name, "%v", err)
			return nil
		}
		var v any
		d := json.NewDecoder(strings.NewReader(string(raw)))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			c.fail(name, "not JSON: %v", err)
		}
		return v
	}
	cfg, _ := read("config.json").(obj)
	c.trialConfig("config.json", cfg)
	res, _ := read("result.json").(obj)
	if res == nil {
		c.fail("result.json", "not an object")
	} else {
		for _, f := range []string{"task_name", "trial_name", "trial_uri", "task_checksum"} {
			c.str("result.json."+f, res[f], false)
		}
		if tid, ok := res["task_id"].(obj); !ok || tid["path"] == nil {
			c.fail("result.json.task_id", "a LocalTaskId needs path")
		}
		rc, _ := res["config"].(obj)
		c.trialConfig("result.json.config", rc)
		ai, _ := res["agent_info"].(obj)
		c.str("result.json.agent_info.name", ai["name"], false)
		c.str("result.json.agent_info.version", ai["version"], false)
		if mi, ok := ai["model_info"].(obj); ok {
			c.str("result.json.agent_info.model_info.name", mi["name"], false)
		}
		if ar, ok := res["agent_result"].(obj); ok {
			for _, f := range []string{"n_input_tokens", "n_cache_tokens", "n_output_tokens"} {
				c.integer("result.json.agent_result."+f, ar[f], nil)
			}
		}
		if vr, ok := res["verifier_result"].(obj); ok {
			if rw, ok := vr["rewards"].(obj); ok {
				for k, x := range rw {
					c.number("result.json.verifier_result.rewards."+k, x, false)
				}
			}
		}
		if ei, ok := res["exception_info"].(obj); ok {
			for _, f := range []string{"exception_type", "exception_message", "exception_traceback", "occurred_at"} {
				c.str("result.json.exception_info."+f, ei[f], false)
			}
		}
		for _, f := range []string{"started_at", "finished_at"} {
			if ts, ok := c.str("result.json."+f, res[f], true); ok {
				if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
					c.fail("result.json."+f, "not ISO 8601: %q", ts)
				}
			}
		}
	}
	name := "trajectory.json"
	for seen := map[string]bool{}; name != "" && !seen[name]; {
		seen[name] = true
		raw, err := os.ReadFile(filepath.Join(dir, "agent", name))
		if err != nil {
			c.fail("agent/"+name, "%v", err)
			break
		}
		for _, e := range Validate(raw) {
			c.fail("agent/"+name, "%s", e)
		}
		var t struct {
			Next string `json:"continued_trajectory_ref"`
		}
		json.Unmarshal(raw, &t)
		name = t.Next
	}
	return c.errs
}

func (c *checker) trialConfig(path string, o obj) {
	if o == nil {
		c.fail(path, "not an object")
		return
	}
	if t, ok := o["task"].(obj); !ok || t["path"] == nil {
		c.fail(path+".task", "a TaskConfig needs path")
	}
}

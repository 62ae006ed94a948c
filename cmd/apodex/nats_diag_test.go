package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/apodex/apodex/internal/jetstream"
)

// What the process tests of the queue log when an eval stalls.

// jsz is what a node's /jsz says of its accounts' streams and consumers.
type jsz struct {
	Accounts []struct {
		Streams []struct {
			Name    string `json:"name"`
			Cluster struct {
				Leader string `json:"leader"`
			} `json:"cluster"`
			State struct {
				Msgs uint64 `json:"messages"`
			} `json:"state"`
			Consumers []struct {
				Name    string `json:"name"`
				Cluster struct {
					Leader string `json:"leader"`
				} `json:"cluster"`
				Pending     uint64 `json:"num_pending"`
				AckPending  int    `json:"num_ack_pending"`
				Redelivered int    `json:"num_redelivered"`
				Waiting     int    `json:"num_waiting"`
				Delivered   struct {
					Stream uint64 `json:"stream_seq"`
				} `json:"delivered"`
				AckFloor struct {
					Stream uint64 `json:"stream_seq"`
				} `json:"ack_floor"`
			} `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// jsz reads the node's /jsz, with the consumers when asked.
func (nd *natsNode) jsz(consumers bool) (jsz, error) {
	var out jsz
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz?accounts=true&streams=true&consumers=%v", nd.monitor, consumers))
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&out)
	return out, err
}

// describe is what the node's /jsz says of the queue's streams and their
// consumers (leader, messages, pending, redelivered), and its log's tail:
// what a stalled eval is waiting on.
func (nd *natsNode) describe() string {
	var b strings.Builder
	if jsz, err := nd.jsz(true); err != nil {
		fmt.Fprintf(&b, "node %s: %v\n", nd.name, err)
	} else {
		for _, a := range jsz.Accounts {
			for _, s := range a.Streams {
				if s.Name != jetstream.RolloutStream && s.Name != jetstream.ResultStream {
					continue
				}
				fmt.Fprintf(&b, "node %s: stream %s leader %s, %d messages\n", nd.name, s.Name, s.Cluster.Leader, s.State.Msgs)
				for _, c := range s.Consumers {
					fmt.Fprintf(&b, "  consumer %s leader %s: pending %d, ack pending %d, redelivered %d, waiting %d, delivered %d, ack floor %d\n",
						c.Name, c.Cluster.Leader, c.Pending, c.AckPending, c.Redelivered, c.Waiting, c.Delivered.Stream, c.AckFloor.Stream)
				}
			}
		}
	}
	if raw, err := os.ReadFile(nd.logPath); err == nil {
		var ls []string // but the retries to reach the killed node
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if !strings.Contains(l, "Error trying to connect to route") {
				ls = append(ls, l)
			}
		}
		fmt.Fprintf(&b, "node %s log (last 40 lines):\n%s\n", nd.name, strings.Join(ls[max(0, len(ls)-40):], "\n"))
	}
	return b.String()
}

// goroutinesIn is the stacks of this process's goroutines that run code
// of pkg: where a stalled in-process command waits.
func goroutinesIn(pkg string) string {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	var out []string
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, pkg) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

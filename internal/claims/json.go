package claims

import (
	"encoding/json"

	"github.com/apodex/apodex/internal/record"
)

// factsJSON is Facts as JSON: everything it holds, so that a run's
// projection can be checkpointed and read back exactly. The board is kept
// as the board events it applied (replayed on reading).
type factsJSON struct {
	Claims      []Claim                     `json:"claims"`
	Marks       map[string]record.ClaimMark `json:"marks"`
	Reopened    map[string]int64            `json:"reopened"`
	BoardEvents []record.Board              `json:"board_events"`
	Declared    []string                    `json:"declared"`
	Written     []string                    `json:"written"`
	Producers   map[string][]string         `json:"producers"`
	Cites       map[string][]string         `json:"cites"`
	ItemOf      map[string]string           `json:"item_of"`
}

// MarshalJSON encodes the facts whole.
func (f *Facts) MarshalJSON() ([]byte, error) {
	return json.Marshal(factsJSON{Claims: f.Claims, Marks: f.Marks, Reopened: f.Reopened, BoardEvents: f.boardEvents,
		Declared: f.w.declared, Written: f.w.written, Producers: f.w.producers, Cites: f.w.cites, ItemOf: f.w.itemOf})
}

// UnmarshalJSON reads facts MarshalJSON wrote; they then advance as the
// facts they were.
func (f *Facts) UnmarshalJSON(data []byte) error {
	var v factsJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*f = *NewFacts()
	f.Claims, f.boardEvents = v.Claims, v.BoardEvents
	for i, c := range f.Claims {
		f.index[c.ID] = i
	}
	if v.Marks != nil {
		f.Marks = v.Marks
	}
	if v.Reopened != nil {
		f.Reopened = v.Reopened
	}
	for _, be := range v.BoardEvents {
		if err := f.Board.Apply(f.Board.Seq()+1, be); err != nil {
			return err
		}
	}
	f.w.declared, f.w.written = v.Declared, v.Written
	if v.Producers != nil {
		f.w.producers = v.Producers
	}
	if v.Cites != nil {
		f.w.cites = v.Cites
	}
	if v.ItemOf != nil {
		f.w.itemOf = v.ItemOf
	}
	return nil
}

var _ json.Marshaler = (*Facts)(nil)

package board

import "encoding/json"

// boardJSON is a Board as JSON: its items in id order and its seq.
type boardJSON struct {
	Seq   int64   `json:"seq"`
	Items []*Item `json:"items"`
}

// MarshalJSON encodes the whole board (items and seq), so that a run's
// projection can be checkpointed and read back as it was.
func (b *Board) MarshalJSON() ([]byte, error) {
	items := b.items
	if items == nil {
		items = []*Item{}
	}
	return json.Marshal(boardJSON{Seq: b.seq, Items: items})
}

// UnmarshalJSON reads a board MarshalJSON wrote.
func (b *Board) UnmarshalJSON(data []byte) error {
	var v boardJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	b.seq, b.items = v.Seq, v.Items
	if len(b.items) == 0 {
		b.items = nil
	}
	return nil
}

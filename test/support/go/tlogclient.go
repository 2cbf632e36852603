// A client of a C2SP transparency log written with the Go checksum database's own packages
// (golang.org/x/mod/sumdb/note and sumdb/tlog, Debian's golang-golang-x-mod-dev), for
// test/integrity/transparency-log.test.ts: nothing of audit-trail's code checks what it checks. It fetches the
// tenant's checkpoint and tiles over HTTP with the tenant's API key, verifies the checkpoint's note signature
// with the log's vkey, proves the inclusion of chosen leaves from the tiles (and that each entry of the entry
// bundle is the leaf), and proves a consistency between an earlier checkpoint and the current one.
//
//	tlogclient -url <log prefix> -key <API key> -vkey <vkey> [-leaves 0,5,300] [-old <checkpoint file>]
//
// It prints the verified checkpoint and one line per leaf as JSON; any failure exits 1 with the reason.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const tileHeight = 8

type client struct {
	prefix string
	key    string
}

func (c *client) get(path string) ([]byte, error) {
	request, err := http.NewRequest("GET", c.prefix+"/"+path, nil)
	if err != nil {
		return nil, err
	}
	request.Header.Set("Authorization", "Bearer "+c.key)
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return nil, err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	if err != nil {
		return nil, err
	}
	if response.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d %s", path, response.StatusCode, body)
	}
	return body, nil
}

// c2spPath turns tlog's tile path (tile/8/<L or data>/<N>[.p/<W>]) into tlog-tiles' (tile/<L or entries>/...).
func c2spPath(t tlog.Tile) string {
	path := strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", tileHeight))
	if strings.HasPrefix(path, "data/") {
		path = "entries/" + strings.TrimPrefix(path, "data/")
	}
	return "tile/" + path
}

// tileReader serves tlog.TileHashReader from the log's HTTP tiles; the hash reader checks each tile
// against the verified tree before using it.
type tileReader struct{ c *client }

func (r tileReader) Height() int { return tileHeight }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	data := make([][]byte, len(tiles))
	for i, t := range tiles {
		body, err := r.c.get(c2spPath(t))
		if err != nil {
			return nil, err
		}
		data[i] = body
	}
	return data, nil
}

func (r tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

type checkpoint struct {
	Origin string `json:"origin"`
	Size   int64  `json:"size"`
	Root   string `json:"root"`
	tree   tlog.Tree
}

// openCheckpoint verifies a signed note with the log's key and parses its three lines.
func openCheckpoint(signed []byte, verifier note.Verifier) (checkpoint, error) {
	n, err := note.Open(signed, note.VerifierList(verifier))
	if err != nil {
		return checkpoint{}, fmt.Errorf("checkpoint signature: %w", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return checkpoint{}, errors.New("checkpoint text is not three lines")
	}
	if lines[0] != verifier.Name() {
		return checkpoint{}, fmt.Errorf("origin %q is not the key's name %q", lines[0], verifier.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 {
		return checkpoint{}, fmt.Errorf("bad tree size %q", lines[1])
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		return checkpoint{}, fmt.Errorf("bad root hash: %w", err)
	}
	return checkpoint{Origin: lines[0], Size: size, Root: lines[2], tree: tlog.Tree{N: size, Hash: root}}, nil
}

// entryOf reads leaf i's entry from its entry bundle, partial when the tree ends inside it.
func entryOf(c *client, tree tlog.Tree, i int64) ([]byte, error) {
	t := tlog.Tile{H: tileHeight, L: -1, N: i >> tileHeight, W: 1 << tileHeight}
	if end := tree.N - t.N<<tileHeight; end < int64(t.W) {
		t.W = int(end)
	}
	bundle, err := c.get(c2spPath(t))
	if err != nil {
		return nil, err
	}
	for k := int64(0); ; k++ {
		if len(bundle) < 2 {
			return nil, fmt.Errorf("entry bundle %s ends before entry %d", c2spPath(t), i)
		}
		size := int(binary.BigEndian.Uint16(bundle))
		if len(bundle) < 2+size {
			return nil, errors.New("entry bundle truncated")
		}
		if k == i-t.N<<tileHeight {
			return bundle[2 : 2+size], nil
		}
		bundle = bundle[2+size:]
	}
}

type leafResult struct {
	Index   int64  `json:"index"`
	EventID string `json:"event_id"`
	Entry   string `json:"entry"`
}

func run() error {
	prefix := flag.String("url", "", "the log's prefix: <base>/api/v2/public/audit/integrity")
	key := flag.String("key", "", "API key")
	vkey := flag.String("vkey", "", "the log's verifier key")
	leaves := flag.String("leaves", "", "comma-separated leaf indexes to prove")
	old := flag.String("old", "", "a file holding an earlier checkpoint to prove the current one consistent with")
	flag.Parse()
	verifier, err := note.NewVerifier(*vkey)
	if err != nil {
		return fmt.Errorf("vkey: %w", err)
	}
	c := &client{prefix: strings.TrimRight(*prefix, "/"), key: *key}
	signed, err := c.get("checkpoint")
	if err != nil {
		return err
	}
	current, err := openCheckpoint(signed, verifier)
	if err != nil {
		return err
	}
	hashes := tlog.TileHashReader(current.tree, tileReader{c})
	output := map[string]interface{}{"checkpoint": current}
	if *leaves != "" {
		var proven []leafResult
		for _, field := range strings.Split(*leaves, ",") {
			i, err := strconv.ParseInt(field, 10, 64)
			if err != nil || i < 0 || i >= current.Size {
				return fmt.Errorf("leaf %q is not in the tree of size %d", field, current.Size)
			}
			entry, err := entryOf(c, current.tree, i)
			if err != nil {
				return err
			}
			proof, err := tlog.ProveRecord(current.Size, i, hashes)
			if err != nil {
				return fmt.Errorf("inclusion of leaf %d: %w", i, err)
			}
			if err := tlog.CheckRecord(proof, current.Size, current.tree.Hash, i, tlog.RecordHash(entry)); err != nil {
				return fmt.Errorf("leaf %d: its entry is not the leaf the tree holds: %w", i, err)
			}
			var event struct {
				EventID string `json:"event_id"`
			}
			_ = json.Unmarshal(entry, &event)
			proven = append(proven, leafResult{Index: i, EventID: event.EventID, Entry: string(entry)})
		}
		output["leaves"] = proven
	}
	if *old != "" {
		earlierNote, err := os.ReadFile(*old)
		if err != nil {
			return err
		}
		earlier, err := openCheckpoint(earlierNote, verifier)
		if err != nil {
			return fmt.Errorf("earlier %w", err)
		}
		if earlier.Size > current.Size {
			return fmt.Errorf("the earlier checkpoint (%d) is larger than the current one (%d)", earlier.Size, current.Size)
		}
		proof, err := tlog.ProveTree(current.Size, earlier.Size, hashes)
		if err != nil {
			return fmt.Errorf("consistency: %w", err)
		}
		if err := tlog.CheckTree(proof, current.Size, current.tree.Hash, earlier.Size, earlier.tree.Hash); err != nil {
			return fmt.Errorf("the current checkpoint does not extend the earlier one: %w", err)
		}
		output["consistent_with"] = earlier
	}
	encoded, _ := json.Marshal(output)
	fmt.Println(string(bytes.TrimSpace(encoded)))
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

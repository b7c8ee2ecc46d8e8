// Command decodernode is a JSON-RPC node that reads a request body the way geth's
// rpc/json.go did and many Go nodes still do: json.NewDecoder(body).Decode reads the
// first JSON value and leaves whatever follows unread. A batch runs every call in it.
// It counts the calls it ran, so that a test can tell how many calls a gateway let
// reach a node that reads bodies this way (test/http/go-decoder-node.test.ts).
//
//	decodernode -port 0    prints {"msg":"listening","port":N} on stdout
//	POST /...              runs the body's calls; answers each with its id and the count
//	GET /executed          {"executed":N}: the calls run since the start
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
)

type call struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

var executed atomic.Int64

func answer(c call) []byte {
	id := c.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	n := executed.Add(1)
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":"0x` + strconv.FormatInt(n, 16) + `"}`)
}

func serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/executed" {
		fmt.Fprintf(w, `{"executed":%d}`, executed.Load())
		return
	}
	var first json.RawMessage
	// The first value only: what follows it in the body is never read.
	if err := json.NewDecoder(r.Body).Decode(&first); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	trimmed := bytes.TrimLeft(first, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []call
		if err := json.Unmarshal(first, &batch); err != nil {
			w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid batch"}}`))
			return
		}
		answers := make([][]byte, len(batch))
		for i, c := range batch {
			answers[i] = answer(c)
		}
		w.Write(append(append([]byte{'['}, bytes.Join(answers, []byte{','})...), ']'))
		return
	}
	var c call
	if err := json.Unmarshal(first, &c); err != nil {
		w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`))
		return
	}
	w.Write(answer(c))
}

func main() {
	port := flag.Int("port", 0, "the port to listen on, on 127.0.0.1 (0: any free one)")
	flag.Parse()
	listener, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*port))
	if err != nil {
		fmt.Fprintf(os.Stderr, `{"msg":"cannot listen","error":%q}`+"\n", err.Error())
		os.Exit(2)
	}
	fmt.Printf(`{"msg":"listening","port":%d}`+"\n", listener.Addr().(*net.TCPAddr).Port)
	if err := http.Serve(listener, http.HandlerFunc(serve)); err != nil {
		fmt.Fprintf(os.Stderr, `{"msg":"serve failed","error":%q}`+"\n", err.Error())
		os.Exit(1)
	}
}

package hf_test

import (
	"fmt"
	"os"

	"github.com/inferrail/inferrail/model/token/hf"
)

func ExampleLoadDir() {
	tok, err := hf.LoadDir(os.DirFS("testdata"), "qwen3")
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := tok.Encode(nil, "<|im_start|>user\nHello, my dog is cute<|im_end|>\n", false)
	fmt.Println(ids)
	fmt.Println(tok.PreTokenize("Hello, my dog is cute"))
	fmt.Printf("%q\n", tok.Decode(ids[3:6]))
	eos, _ := tok.EOS()
	fmt.Println(eos.Content, eos.ID, tok.VocabSize())
	// Output:
	// [151644 872 198 9707 11 847 5562 374 18838 151645 198]
	// [Hello , Ġmy Ġdog Ġis Ġcute]
	// "Hello, my"
	// <|im_end|> 151645 151669
}

/* tokenize_shards.c - a text corpus into an llm.c token shard with the
 * project's byte-level BPE (what llm.c's fineweb.py and nanoGPT's
 * prepare.py make), for nb_token_window_dataset and gpt_train:
 *
 *   tokenize_shards (--tokenizer tokenizer.json | --vocab vocab.json --merges merges.txt)
 *                   --text corpus.txt --out train.bin [--uint32]
 *
 * Each non-empty line of the text is a document: its tokens, then
 * <|endoftext|>, which the vocabulary must have (nb_bpe_encode_file). Ids
 * are written as uint16 (GPT-2's layout) unless the vocabulary needs more
 * than 16 bits or --uint32 asks for Llama 3's. Prints the token count and
 * the seconds taken. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nabla.h"

static int usage(void) {
    fprintf(stderr, "usage: tokenize_shards (--tokenizer tokenizer.json | --vocab vocab.json --merges merges.txt) "
                    "--text corpus.txt --out shard.bin [--uint32]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *tj = NULL, *vocab = NULL, *merges = NULL, *text = NULL, *out = NULL;
    bool wide = false;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--uint32")) wide = true;
        else if (!v) return usage();
        else if (!strcmp(argv[i], "--tokenizer")) tj = v, i++;
        else if (!strcmp(argv[i], "--vocab")) vocab = v, i++;
        else if (!strcmp(argv[i], "--merges")) merges = v, i++;
        else if (!strcmp(argv[i], "--text")) text = v, i++;
        else if (!strcmp(argv[i], "--out")) out = v, i++;
        else return usage();
    }
    if (!text || !out || (!tj == !(vocab && merges)) || (tj && (vocab || merges))) return usage();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nb_bpe *tok = tj ? nb_bpe_load_tokenizer_json(tj) : nb_bpe_load_gpt2(vocab, merges);
    int64_t n = tok ? nb_bpe_encode_file(tok, text, out, wide || nb_bpe_vocab_size(tok) > 65536) : -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (n < 0) {
        fprintf(stderr, "tokenize_shards: %s\n", nb_last_error());
        nb_bpe_free(tok);
        return 1;
    }
    printf("tokenize_shards: %lld tokens (%s) written to %s in %.2f s\n", (long long)n,
           wide || nb_bpe_vocab_size(tok) > 65536 ? "uint32" : "uint16", out,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    nb_bpe_free(tok);
    return 0;
}

"""Grammar-constrained decoding, in numpy, for every generator (transformers' generate through
training.rlhf.grammar.PlanConstraint, ONNX Runtime through onnx_generator): only tokens that keep the text a prefix of
the plan grammar (plan.PLAN_REGEX) and leave room to finish it within the token budget may be chosen, and
end-of-sequence only once the plan is complete, so every output parses (a budget that no plan fits in gets EOS at
once: an empty output, refused by the parser). The room left is counted in the vocabulary's tokens.

The grammar is a character DFA built here; per DFA state the allowed tokens (and the state each leads to) are
computed once by walking every token's text, so it works for any tokenizer whose tokens decode on their own
(byte-level BPE, as the project's). A tokenizer enters as its vocabulary: one text per token id, None for the ids
that never appear inside a plan (special tokens), so a transformers tokenizer and a `tokenizers.Tokenizer` feed it
alike. vLLM gets the same language as a regex through its structured outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edge.instruct.plan import MAX_SEGMENTS, SEGMENT_PIECES, check_plan_format
from edge.instruct.slots import slot_count

DIGITS = "0123456789"


class PlanDFA:
    """States are ints; `trans[s][ch]` is the next state. START before '[', FINAL after ']'. With `slots` > 0 a
    value may also be a number slot #1..#slots (slots.py); `form`: the plan's form (plan.PLAN_FORMATS)."""

    def __init__(self, max_segments: int = MAX_SEGMENTS, slots: int = 0, form: str = "objects"):
        self.slots, self.form = slots, check_plan_format(form)
        self.trans: list[dict[str, int]] = []
        self.START = self._new()
        self.FINAL = self._new()
        seg = self._literal(self.START, "[")
        for k in range(max_segments):
            end = self._segment(seg)
            self.trans[end]["]"] = self.FINAL
            if k + 1 < max_segments:
                seg = self._new()
                self.trans[end][","] = seg

    def _new(self) -> int:
        self.trans.append({})
        return len(self.trans) - 1

    def _literal(self, s: int, text: str) -> int:
        for ch in text:
            t = self._new()
            self.trans[s][ch] = t
            s = t
        return s

    def _number(self, s: int, signed: bool, follow: str) -> int:
        """-?(0|[1-9]d{0,2})(.d{1,2})? (or -?#k) and then the `follow` character; returns the state after it. An
        unsigned number is a duration and must be above zero (plan.POSITIVE_NUMBER): a step of no duration is never
        what a person means."""
        first = self._new()
        if signed:
            self.trans[s]["-"] = first
        ints = [self._new() for _ in range(3)]
        dot, f1, f2, after = self._new(), self._new(), self._new(), self._new()
        for start in (s, first):
            for d in DIGITS[1:]:
                self.trans[start][d] = ints[0]
        if signed:  # 0 itself, and 0.x like any integer part
            zero = self._new()
            self.trans[s]["0"] = self.trans[first]["0"] = zero
            ints.append(zero)
        else:  # 0.01 to 0.99: after "0." a zero needs a second, non-zero decimal
            zero, zero_dot, zero_f1 = self._new(), self._new(), self._new()
            self.trans[s]["0"] = zero
            self.trans[zero]["."] = zero_dot
            self.trans[zero_dot]["0"] = zero_f1
            for d in DIGITS[1:]:
                self.trans[zero_dot][d] = f1
                self.trans[zero_f1][d] = f2
        if self.slots:  # #1..#slots, after the sign if any
            hash_, slot = self._new(), self._new()
            self.trans[s]["#"] = self.trans[first]["#"] = hash_
            for d in DIGITS[1 : self.slots + 1]:
                self.trans[hash_][d] = slot
            self.trans[slot][follow] = after
        for d in DIGITS:
            self.trans[ints[0]][d] = ints[1]
            self.trans[ints[1]][d] = ints[2]
            self.trans[dot][d] = f1
            self.trans[f1][d] = f2
        for state in ints:
            self.trans[state]["."] = dot
        for state in (*ints, f1, f2):  # a number ends after a digit
            self.trans[state][follow] = after
        return after

    def _segment(self, s: int) -> int:
        """Entered just before the segment; returns the state after it."""
        before, close = SEGMENT_PIECES[self.form]
        s = self._literal(s, before[0])
        for i, nxt in enumerate((*before[1:], close)):
            s = self._number(s, signed=i < 3, follow=nxt[0])
            s = self._literal(s, nxt[1:])
        return s

    def completions(self) -> list[str | None]:
        """Per state, a shortest text that completes a plan from it ('' at FINAL, None where none does). Each is its
        first character and then the completion of the state that character leads to, so every suffix of a state's
        completion is the completion of the state the prefix leads to."""
        dist, first = [float("inf")] * len(self.trans), [""] * len(self.trans)
        dist[self.FINAL] = 0
        changed = True
        while changed:  # Bellman-Ford on a small DAG-like graph: a few passes
            changed = False
            for s, edges in enumerate(self.trans):
                for ch, t in edges.items():
                    if dist[t] + 1 < dist[s]:
                        dist[s], first[s], changed = dist[t] + 1, ch, True
        texts: list[str | None] = []
        for s in range(len(self.trans)):
            if dist[s] == float("inf"):
                texts.append(None)
                continue
            text, state = "", s
            while state != self.FINAL:
                text += first[state]
                state = self.trans[state][first[state]]
            texts.append(text)
        return texts

    def walk(self, state: int | None, text: str) -> int | None:
        for ch in text:
            if state is None:
                return None
            state = self.trans[state].get(ch)
        return state


class TokenGrammar:
    """The DFA lifted to one vocabulary (`texts[id]`: the token's text, None for a token never allowed inside a
    plan); the per-state tables are shared by every generate call."""

    def __init__(self, texts: Sequence[str | None], eos: int, dfa: PlanDFA | None = None):
        self.dfa = dfa or PlanDFA()
        self.eos, self.vocab = eos, len(texts)
        alphabet = {ch for edges in self.dfa.trans for ch in edges}
        # (id, text) of the tokens that can ever appear inside a plan
        self.tokens = [(tid, text) for tid, text in enumerate(texts) if text and set(text) <= alphabet]
        self.completions = self.dfa.completions()
        self.pieces = {text for _, text in self.tokens}
        self.longest = max((len(text) for text in self.pieces), default=0)
        self._left: dict[int, float] = {self.dfa.FINAL: 0}  # memo of tokens_to_finish
        self.rows: dict[int, int] = {}  # DFA state -> row of self.needs
        self.next: list[dict[int, int]] = []  # per row: token id -> next DFA state
        # per row and token: tokens still needed after it to end the plan (EOS included); inf: not allowed
        self.needs = np.zeros((0, self.vocab), np.float32)

    def tokens_to_finish(self, state: int) -> float:
        """The fewest tokens that spell the state's completion (PlanDFA.completions), EOS not counted: a number of
        tokens that always finishes the plan from there (inf: none does). Its first token leads to a state whose
        completion is the rest of this one, so one token fewer finishes from there: every step of the rule keeps
        room to end. Counted in tokens, not characters: a tokenizer that merges '[{"vx":' fits a plan in far fewer
        tokens than characters."""
        if state not in self._left:
            best, text = float("inf"), self.completions[state] or ""  # None: no completion, nothing to walk
            for k in range(1, min(len(text), self.longest) + 1):
                if text[:k] in self.pieces:
                    after = self.dfa.walk(state, text[:k])
                    assert after is not None, "a prefix of a state's completion stays on the DFA"
                    best = min(best, 1 + self.tokens_to_finish(after))
            self._left[state] = best
        return self._left[state]

    def row(self, state: int) -> int:
        if state not in self.rows:
            needs = np.full((1, self.vocab), np.inf, np.float32)
            nxt: dict[int, int] = {}
            if state == self.dfa.FINAL:
                needs[0, self.eos] = 0
            else:
                for tid, text in self.tokens:
                    s = self.dfa.walk(state, text)
                    if s is not None:
                        nxt[tid] = s
                        needs[0, tid] = self.tokens_to_finish(s) + 1
            self.needs = np.concatenate([self.needs, needs])
            self.next.append(nxt)
            self.rows[state] = len(self.next) - 1
        return self.rows[state]


class PlanGrammars:
    """A generator's grammars, one per number of slots a prompt has (a model without slots has one), each built when
    first needed and kept for the generator's life."""

    def __init__(self, texts: Sequence[str | None], eos: int, number_slots: bool, form: str = "objects"):
        self.texts, self.eos, self.number_slots, self.form = list(texts), eos, number_slots, form
        self._by_slots: dict[int, TokenGrammar] = {}

    def for_prompt(self, prompt: str) -> TokenGrammar:
        slots = slot_count(prompt) if self.number_slots else 0
        if slots not in self._by_slots:
            self._by_slots[slots] = TokenGrammar(self.texts, self.eos, PlanDFA(slots=slots, form=self.form))
        return self._by_slots[slots]


class GrammarMask:
    """The allowed-token mask of one batched generation, one `step` per generated token: it follows each row's DFA
    state token by token (each row has its prompt's grammar: the number slots differ), and allows only tokens after
    which the plan can still be finished within the call's token budget, so a plan always ends. A budget too small
    for any plan allows EOS only."""

    def __init__(self, grammars: Sequence[TokenGrammar], max_new_tokens: int):
        self.grammars, self.budget = list(grammars), max_new_tokens
        self.states: list[int | None] = [g.dfa.START for g in self.grammars]
        self.generated = -1  # the first step sees the prompts only
        self.groups: dict[int, list[int]] = {}  # rows per grammar, so each grammar's mask is one indexing op
        for i, g in enumerate(self.grammars):
            self.groups.setdefault(id(g), []).append(i)

    def step(self, last: Sequence[int] | np.ndarray | None) -> np.ndarray:
        """[rows, vocab] bool: the tokens each row may take next. `last`: the token each row took at the previous
        step (None at the first). A row off the grammar (it ended) may take anything: its caller pads it."""
        self.generated += 1
        if self.generated:
            if last is None:
                raise TypeError("GrammarMask.step: `last` is None after the first step")
            self.states = [
                None if s is None else g.next[g.rows[s]].get(int(t))
                for g, s, t in zip(self.grammars, self.states, last, strict=True)
            ]
        allowed = np.ones((len(self.grammars), self.grammars[0].vocab), bool)
        left = self.budget - self.generated - 1  # tokens that may follow this one
        for rows in self.groups.values():
            g = self.grammars[rows[0]]
            live = {i: s for i in rows if (s := self.states[i]) is not None}  # row -> its DFA state
            if live:
                rows_of_states = [g.row(s) for s in live.values()]  # may add rows to g.needs: index after
                allowed[list(live)] = g.needs[rows_of_states] <= left
        if not self.generated:  # a row that starts with room to end keeps it (tokens_to_finish): check once
            # a budget no plan fits ends the row at once: an empty text the parser refuses, never a row off the grammar
            allowed[~allowed.any(-1), self.grammars[0].eos] = True
        return allowed

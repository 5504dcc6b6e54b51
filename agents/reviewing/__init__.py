"""The reviewing model: a second model that recommends, or decides, a request people would
otherwise decide (docs/reviewing-model.md). `setting` reads a policy's `review:`, `bounds`
says whether a request may go to the model at all, `asking` sends it there after commit,
`facts` is all the model is shown, `answers` asks the model, `verdicts` applies what it said.
"""

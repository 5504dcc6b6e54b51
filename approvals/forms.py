"""The new-run form: pick an agent, write the first message."""

from django import forms
from django.conf import settings
from django.core import validators

from agents import external
from agents.models import AgentDefinition


class NewRunForm(forms.Form):
    # The agents the gateway runs: not an MCP server's or an outside agent's (their requests
    # come from outside; no model of the gateway runs them).
    agent = forms.ModelChoiceField(
        queryset=AgentDefinition.objects.exclude(model=external.MODEL),
        to_field_name="name",
        empty_label="Choose an agent",
    )
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}))

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        # The API's limit (POST /api/threads), read per form so a changed setting applies;
        # the field renders it as the textarea's maxlength.
        message = self.fields["message"]
        message.max_length = settings.MAX_MESSAGE_CHARS
        message.validators.append(validators.MaxLengthValidator(message.max_length))
        message.widget.attrs.update(message.widget_attrs(message.widget))

    def clean_message(self) -> str:
        message = self.cleaned_data["message"].strip()
        if not message:
            raise forms.ValidationError("Write the first message.")
        return message


class AuditFilterForm(forms.Form):
    """The audit trail's filters; every one is optional."""

    since = forms.DateField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, label="To", widget=forms.DateInput(attrs={"type": "date"})
    )
    agent = forms.ChoiceField(required=False)
    tool = forms.ChoiceField(required=False)
    reviewer = forms.ChoiceField(required=False)
    outcome = forms.ChoiceField(required=False)

    def __init__(self, *args: object, **kwargs: object) -> None:
        from django.contrib.auth import get_user_model

        from agents.models import Suspension

        super().__init__(*args, **kwargs)
        # The values the trail holds, so each filter offers only what can match.
        rows = Suspension.objects.order_by()

        def held(column: str) -> list[str]:
            return list(
                rows.exclude(**{column: ""})
                .values_list(column, flat=True)
                .distinct()
                .order_by(column)
            )

        self.fields["agent"].choices = [("", "Any agent"), *((a, a) for a in held("agent_name"))]
        self.fields["tool"].choices = [("", "Any tool"), *((t, t) for t in held("tool_name"))]
        names = held("decided_by_name")
        full = {
            u.username: u.get_full_name()
            for u in get_user_model().objects.filter(username__in=names)
        }
        self.fields["reviewer"].choices = [
            ("", "Anyone"),
            *((n, f"{full[n]} ({n})" if full.get(n) else n) for n in names),
        ]
        self.fields["outcome"].choices = [("", "Any outcome"), *Suspension.Status.choices]

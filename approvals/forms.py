"""The new-run form: pick an agent, write the first message."""

from django import forms
from django.conf import settings
from django.core import validators

from agents.models import AgentDefinition


class NewRunForm(forms.Form):
    agent = forms.ModelChoiceField(
        queryset=AgentDefinition.objects.all(), to_field_name="name", empty_label="Choose an agent"
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
    agent = forms.CharField(required=False, max_length=100)
    tool = forms.CharField(required=False, max_length=100)
    reviewer = forms.CharField(required=False, max_length=150)
    outcome = forms.ChoiceField(required=False)

    def __init__(self, *args: object, **kwargs: object) -> None:
        from agents.models import Suspension

        super().__init__(*args, **kwargs)
        self.fields["outcome"].choices = [("", "Any outcome"), *Suspension.Status.choices]

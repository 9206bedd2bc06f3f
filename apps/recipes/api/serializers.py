from rest_framework import serializers


class RecipeSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    digest = serializers.CharField()
    description = serializers.CharField()
    framework = serializers.CharField()
    observability = serializers.ChoiceField(choices=["external", "platform"])
    entrypoint = serializers.CharField()
    launcher = serializers.ChoiceField(choices=["bash", "torchrun"])
    bindings = serializers.DictField()
    parameters = serializers.DictField()
    operations = serializers.ListField(child=serializers.CharField())
    runtime = serializers.DictField()
